"""The inputs of an analysis: conditional tables, instances, random instances, processed targets.

* [`models`][spectheory.inputs.models]: the draft and target models as conditional tables;
* [`instances`][spectheory.inputs.instances]: an instance (draft q, target p, block length L) and
  its JSON format;
* [`random_instances`][spectheory.inputs.random_instances]: random instances, rational or float;
* [`processing`][spectheory.inputs.processing]: sampling parameters (temperature, top-k, top-p,
  ...) applied to the rows of an instance, as an engine applies them before verification.
"""
