"""Learning phases: one module or package per phase kind, registered in :mod:`meeple.phases.registry`.

A Lightning phase's builder turns a stage's config into :class:`~meeple.phases.parts.PhaseParts`;
``meeple.pipeline.lightning_stage.build_stage`` does what every phase shares (hardware, the
callbacks, the Trainer arguments).
"""
