"""Designs of sharp checks: [`sharp`][spectheory.testing.designs.sharp] chooses, from the bug kit's
exact laws ([`spectheory.testing.mutants`][spectheory.testing.mutants]), the few draft rows on
which a law-mode check of a slow kernel catches every replica a sampling check can see. It builds
on the bug kit, which builds on the checks.
"""
