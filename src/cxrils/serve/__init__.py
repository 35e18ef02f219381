"""Web page and REST service for instruction-guided segmentation (FastAPI)."""
