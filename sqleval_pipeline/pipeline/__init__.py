"""The evaluation pipeline: the stages and the batch folder they share.

Read in the order a batch is made (each stage reads only what an earlier one persisted):

* :mod:`.environment` — the pinned inputs every stage shares (snapshot, golden set, store);
* :mod:`.batch_files` — the files of a batch folder, named once; :mod:`.store` — batches,
  their manifest and damage, locks; :mod:`.storage` — the shared remote copy;
* :mod:`.records` and :mod:`.recordio` — the records each stage writes (attempts, executions,
  grades, diagnoses) and how they are written and streamed;
* :mod:`.evaluation` — stages 1–4: attempts, guarded executions, grades, diagnoses, scorecard;
  :mod:`.streams` — walking attempts and executions in step;
* :mod:`.comparisons` — stage 5: comparisons and the regression gate;
* :mod:`.derived` — derived files reused when their inputs are unchanged;
* :mod:`.casefile` — one case across a batch's files (``sqleval show``).
* :mod:`.progress` — the process-wide sink long stages report to (the CLI's progress bars).

The Dagster assets (:mod:`sqleval_pipeline.defs.evaluation`) are thin wrappers over these.
"""
