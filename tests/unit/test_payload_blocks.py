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


@given(count=st.integers(0, 2_000), parts=st.integers(1, 300), times=st.integers(1, 40))
def test_one_block_and_repeats_without_the_list(count, parts, times):
    # What a rank of a collective-fidelity call asks for: its own block, or p copies joined.
    data = DataPayload(np.arange(count, dtype=np.float32))
    size = SizePayload(count, np.float32)
    for index in {0, parts // 2, parts - 1}:
        assert size.split_block(parts, index).count == size.split(parts)[index].count
        assert np.array_equal(data.split_block(parts, index).array, data.split(parts)[index].array)
    assert size.repeat(times).count == SizePayload.concat([size] * times).count == count * times
    assert np.array_equal(data.repeat(times).array, np.tile(data.array, times))
