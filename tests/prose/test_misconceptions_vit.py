"""Misconceptions page, "Vision Transformers use sinusoidal encodings": partly true.

The original ViT learns its position table, but MAE-style vision transformers (Hugging
Face's ``ViTMAE``) use a *fixed* 2-D sin-cos table: the concatenated sinusoidal encoding
of chapter 2 applied to the row and to the column index of each patch. Checked here on
a tiny, randomly initialised model (no download).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc

transformers = pytest.importorskip("transformers")


def test_vit_mae_position_table_is_fixed_2d_sinusoidal():
    from transformers.models.vit_mae import modeling_vit_mae as mae

    config = transformers.ViTMAEConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, decoder_hidden_size=16, decoder_num_hidden_layers=1, decoder_intermediate_size=32,
    )
    model = transformers.ViTMAEModel(config)
    assert not model.embeddings.position_embeddings.requires_grad  # frozen: not a learned embedding
    # the table ViTMAEEmbeddings.initialize_weights copies in: 2-D sin-cos with a zero [CLS] row
    grid = 32 // 8
    table = mae.build_2d_sinusoidal_position_embedding(height=grid, width=grid, embed_dim=32, cls_token=True)
    rows, cols = np.divmod(np.arange(grid * grid), grid)
    half = 32 // 2  # each axis gets half the width, as [sin | cos]
    one_axis = {name: posenc.sinusoidal_encoding(pos.astype(float), half, layout="concatenated")
                for name, pos in (("row", rows), ("col", cols))}
    got = table[1:].double().numpy()
    # transformers keeps the original MAE code's axis order; accept either, both are 2-D sin-cos
    candidates = [np.concatenate([one_axis[a], one_axis[b]], axis=1) for a, b in (("row", "col"), ("col", "row"))]
    assert min(np.abs(got - c).max() for c in candidates) < 1e-6
    assert float(table[0].abs().max()) == 0.0
