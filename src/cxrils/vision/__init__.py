"""Image-side stages: anatomy masks, anomaly map, lesion boxes (paper section 3.1 step 2)."""
