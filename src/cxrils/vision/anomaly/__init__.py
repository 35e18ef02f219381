"""Anomaly maps: a pseudo-healthy image x_hat and x_ano = max(x - x_hat, 0) / 255
(paper section 3.1 step 2).

Backends: ``builtin`` (CPU, default, :mod:`.builtin`) and ``radedit`` (diffusers,
:mod:`.radedit`). Choose with ``cfg.backends.anomaly``.
"""

from cxrils.vision.anomaly.base import (
    AnomalyBackendError,
    AnomalyMapper,
    anomaly_result,
    check_inputs,
    get_anomaly_mapper,
)

__all__ = ["AnomalyBackendError", "AnomalyMapper", "anomaly_result", "check_inputs", "get_anomaly_mapper"]
