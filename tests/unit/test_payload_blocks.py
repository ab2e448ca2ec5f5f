"""Size-only payloads cut into the same blocks as real data, without making one object per block."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mpisim.mpi.payload import DataPayload, SizePayload, ceil_split_counts, split_counts


@given(count=st.integers(0, 10_000), parts=st.integers(1, 300))
def test_size_only_blocks_have_the_sizes_of_real_data_blocks(count, parts):
    data = DataPayload(np.zeros(count, dtype=np.float32))
    size = SizePayload(count, np.float32)
    assert [b.count for b in size.split_ceil(parts)] == [b.count for b in data.split_ceil(parts)]
    assert [b.count for b in size.split_ceil(parts)] == ceil_split_counts(count, parts)
    assert [b.count for b in size.split(parts)] == split_counts(count, parts)
    assert all(b.dtype == np.float32 for b in size.split_ceil(parts))
