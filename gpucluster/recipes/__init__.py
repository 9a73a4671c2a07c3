"""The recipes: which components a cluster gets and with which values.

Owns: the catalog (registry, overlays, mixins and values files, :mod:`gpucluster.recipes.catalog`;
the data folder itself is ``gpucluster/catalog/``), the overlay index
(:mod:`gpucluster.recipes.overlays`), recipe resolution (:mod:`gpucluster.recipes.recipe`), values
layering (:mod:`gpucluster.recipes.layering`), reading and writing an AICR RecipeResult
(:mod:`gpucluster.recipes.recipe_result`, :mod:`gpucluster.recipes.recipe_result_writer`), the user's overrides and scheduling
(:mod:`gpucluster.recipes.overrides`, :mod:`gpucluster.recipes.scheduling`), the fail-closed core
policy checks (:mod:`gpucluster.recipes.policy`), the per-chart-version values
(:mod:`gpucluster.recipes.chart_versions`) and the catalog's upgrade rules
(:mod:`gpucluster.recipes.upgrade_rules`).

May import: the leaves at the package root (:mod:`gpucluster.model`, :mod:`gpucluster.errors`,
:mod:`gpucluster.values`, :mod:`gpucluster.versions`, :mod:`gpucluster.schemas`,
:mod:`gpucluster.yamlsafe`, :mod:`gpucluster.fields`, :mod:`gpucluster.diskcache`,
:mod:`gpucluster.policy_keys`) and
:mod:`gpucluster.plugins` (the catalog, adjust-values and policy hooks). Nothing from
:mod:`gpucluster.inputs`, :mod:`gpucluster.charts`, :mod:`gpucluster.pipeline`,
:mod:`gpucluster.lint`, :mod:`gpucluster.live` or ``gpucluster.sdk``.
"""
