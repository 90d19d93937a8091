"""gpu_validation package."""
