"""The released MIMIC-CXR-Ext-ILS 1.0.0 format (KAIST-Edlab/ROSALIA layout): import and export.

See ``docs/mimic-ils.md``. :func:`import_mimic_ils` streams the release JSON into a
cxrils dataset; :func:`export_mimic_ils` writes a cxrils dataset in the release layout.
"""

from cxrils.dataset.mimic_ils.exporter import export_mimic_ils
from cxrils.dataset.mimic_ils.importer import import_mimic_ils

__all__ = ["export_mimic_ils", "import_mimic_ils"]
