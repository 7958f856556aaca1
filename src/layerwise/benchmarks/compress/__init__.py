"""The ``compress`` results page (issue #25): :class:`~layerwise.Compressor` on the built-in models, every unlabeled
sentence available here as the distillation corpus, STS-B dev choosing, STS-B test, SICK-R and STS12-16 reported."""
