"""cxrils: instruction-guided lesion segmentation (ILS) for chest X-rays.

Implements the system of "Instruction-Guided Lesion Segmentation for Chest X-rays
with Automatically Generated Large-Scale Dataset" (arXiv 2511.15186): automatic
generation of MIMIC-ILS-style instruction-answer-mask records, the ROSALIA (LISA)
model and a light CPU model, and the paper's evaluation.
"""

__version__ = "0.1.0"
