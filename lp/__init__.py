"""lp package."""
