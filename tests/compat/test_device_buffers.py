"""Device buffers (DLPack, ``__cuda_array_interface__``) read as host memory, as mpi4py's own tests build them.

mpi4py's test suite wraps host memory in classes that expose only ``__cuda_array_interface__``
(a fake GPU array) or only ``__dlpack__``; the program below does the same, so each buffer
reaches mpisim exactly as a CuPy or PyTorch array would, and the results are checked
against numpy.
"""

from __future__ import annotations

from tests.compat.test_mpi4py_api import ok

FAKES = """\
    import numpy as np
    from mpi4py import MPI

    class FakeGPU:  # only the CUDA Array Interface, over a numpy array's memory
        def __init__(self, array, readonly=False, strides=None):
            self.array = array
            self.__cuda_array_interface__ = {"version": 3, "data": (array.ctypes.data, readonly),
                                             "typestr": array.dtype.str, "shape": array.shape,
                                             "strides": strides}

    class DLPackOnly:  # only DLPack, the way torch.Tensor offers it
        def __init__(self, array):
            self.array = array
        def __dlpack__(self, **kw):
            return self.array.__dlpack__(**kw)
        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    comm = MPI.COMM_WORLD
    r, p = comm.rank, comm.size
"""


def test_fake_gpu_and_dlpack_buffers_carry_their_data_and_datatype(tmp_path):
    out = ok(tmp_path, FAKES + """\
    a = np.arange(6, dtype="f8") + r
    b = np.zeros(6, dtype="f8")
    comm.Sendrecv(FakeGPU(a), (r + 1) % p, 0, FakeGPU(b), (r - 1) % p, 0)  # datatype from typestr
    c = np.zeros(6, dtype="i4")
    comm.Allreduce(DLPackOnly(np.arange(6, dtype="i4") * (r + 1)), DLPackOnly(c), MPI.SUM)
    d = np.zeros(3 * p, dtype="i8")
    comm.Allgather(FakeGPU(np.full(3, r, dtype="i8")), [FakeGPU(d), MPI.INT64_T])
    print(r, b.tolist() == (np.arange(6) + (r - 1) % p).tolist(), c.tolist(), d.tolist())
""", 3)
    lines = sorted(out.splitlines())
    assert lines[0] == "0 True [0, 6, 12, 18, 24, 30] [0, 0, 0, 1, 1, 1, 2, 2, 2]"
    assert [x.split()[1] for x in lines] == ["True"] * 3


def test_device_buffers_mpi4py_refuses_are_buffer_errors(tmp_path):
    out = ok(tmp_path, FAKES + """\
    for name, buf in [("readonly", FakeGPU(np.zeros(4), readonly=True)),
                      ("strided", FakeGPU(np.zeros(8), strides=(16,)))]:
        try:
            comm.Sendrecv(np.zeros(4), 0, 0, buf, 0, 0)  # (mpi4py reads no buffer for PROC_NULL)
        except BufferError as err:
            print(name, "BufferError", "writable" in str(err) or "contiguous" in str(err))
    comm.Sendrecv(FakeGPU(np.ones(4), readonly=True), 0, 0, FakeGPU(np.zeros(4)), 0, 0)  # read-only send: fine
    print("sent")
""", 1)
    assert out == "readonly BufferError True\nstrided BufferError True\nsent\n"
