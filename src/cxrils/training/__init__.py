"""Everything that makes weights: the trainers of the built-in models and the datasets
they train on (issue 30).

* :mod:`~cxrils.training.anatomy_data`, :mod:`~cxrils.training.anatomy_train`: the
  anatomy network (``cxrils train-anatomy``) on the JSRT/SCR, COVID-19 v7labs and
  COVID-QU-Ex lung masks, with its fixed held-back split;
* :mod:`~cxrils.training.lesion_data`, :mod:`~cxrils.training.lesion_train`,
  :mod:`~cxrils.training.anomaly_train`, :mod:`~cxrils.training.detector_train`: the built-in lesion map and lesion detector
  (``cxrils train-anomaly``, ``cxrils train-detector``) on COVID-QU-Ex infection masks;
* :mod:`~cxrils.training.synthetic`: synthetic findings drawn on training images;
* :mod:`~cxrils.training.human_grounding`, :mod:`~cxrils.training.light_data`,
  :mod:`~cxrils.training.light_train`: the light model's training dataset from human
  lesion masks, and its training (``cxrils train``).

Their settings are the frozen dataclasses of :mod:`cxrils.config` (``AnatomyDataConfig``,
``LesionDataConfig``, ``SyntheticConfig``, ``LesionTrainConfig`` and its two subclasses,
``LightDataConfig``), kept with every other dataset-changing constant.

Inference never imports this package (``tests/test_imports.py``): the built-in models load
their weights through the network definitions of :mod:`cxrils.vision.lesion_nets`,
:mod:`cxrils.vision.anatomy.network` and :mod:`cxrils.models.light`.
"""
