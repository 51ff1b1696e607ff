"""The book's laboratory: what the chapters and ``experiments/`` need beyond the library.

Import the module you need by name, for example
``from posenc.book import analysis, plotting``. The package itself re-exports nothing.

Shared by two or more chapters:

* :mod:`~posenc.book.engine`: ``seeded``, the one training loop ``fit`` (and
  ``fit_batched`` for several trials as one batched model), the base ``TrialConfig``;
* :mod:`~posenc.book.results`: results files, ``summarize`` over seeds, provenance and
  fingerprints, the ``Experiment`` harness of the scripts in ``experiments/``;
* :mod:`~posenc.book.plotting`: the book's figure style and the figure helpers;
* :mod:`~posenc.book.tables`: result tables as Markdown and as shaded heat-tables;
* :mod:`~posenc.book.models`: the transformer block and the small causal transformer;
* :mod:`~posenc.book.resources`: the data files shipped with the package.

One per chapter:

* :mod:`~posenc.book.analysis`: chapters 1-3, measurements on the encodings and the
  rounding of the numbers the prose quotes;
* :mod:`~posenc.book.probes` and :mod:`~posenc.book.released`: chapter 4, attention-head
  probes and the table of released models;
* :mod:`~posenc.book.tabular`: chapter 5, data sets, model and baselines;
* :mod:`~posenc.book.tasks`, :mod:`~posenc.book.training` and
  :mod:`~posenc.book.synthetic`: chapter 6, the synthetic tasks, their trials and grid;
* :mod:`~posenc.book.realtext` and :mod:`~posenc.book.realtext_report`: chapter 7,
  character-level language modelling and the reading of its grid;
* :mod:`~posenc.book.vision`: chapter 8, the small vision transformer.

It needs the ``book`` extra (matplotlib, scipy, scikit-learn, myst-nb, transformers):
``pip install "posenc[book] @ git+https://github.com/posenc-book/posenc-book"``.
"""
