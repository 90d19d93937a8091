"""toy_models package."""
