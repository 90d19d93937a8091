"""The figure gallery (installed as ``spectheory.gallery``): one script per figure,
``figN_<name>.py``, run by ``spectheory figures``; each script is also runnable on its own."""
