"""Device buffers as mpi4py reads them: DLPack capsules and ``__cuda_array_interface__``.

mpi4py accepts, besides the buffer protocol, any object exposing DLPack (``__dlpack__`` and
``__dlpack_device__``: PyTorch, JAX, CuPy, NumPy) or the CUDA Array Interface
(``__cuda_array_interface__``: CuPy, Numba, PyTorch), in that order of preference, and hands
the raw pointer they describe to MPI, which with a CUDA-aware build reads device memory
directly. mpisim has no GPU: the pointer is read as host memory, which is exactly what it is
for a CPU DLPack tensor, a pinned (``kDLCUDAHost``) one, and the fake device arrays mpi4py's
own tests build over host memory. The checks and their ``BufferError`` words are mpi4py's
(``asdlpack.pxi``, ``ascaibuf.pxi``): a non-contiguous, masked or read-only-for-a-receive
buffer is refused.

Each view keeps the object that owns the memory (the capsule, or the array itself) alive as
long as the view lives, as mpi4py's ``Py_buffer.obj`` does.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

_CPU, _CUDA_HOST = 1, 3


class DeviceBufferError(Exception):
    """A device buffer mpi4py refuses (raised by mpi4py as ``BufferError``)."""


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype, _capsule_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]

#: DLPack's (type code, bits) -> numpy dtype; any other type is read as bytes, as mpi4py does.
_DL_DTYPES = {(0, 8): "i1", (0, 16): "i2", (0, 32): "i4", (0, 64): "i8", (1, 8): "u1", (1, 16): "u2",
              (1, 32): "u4", (1, 64): "u8", (2, 16): "f2", (2, 32): "f4", (2, 64): "f8", (5, 64): "c8",
              (5, 128): "c16", (6, 8): "?"}
if np.dtype(np.longdouble).itemsize == 16:  # C's long double, 80-bit x87 padded to 16 bytes (asdlpack.pxi: "g")
    _DL_DTYPES.update({(2, 128): "g", (5, 256): "G"})


def is_device(obj: Any) -> bool:
    return hasattr(obj, "__dlpack__") or hasattr(obj, "__cuda_array_interface__")


def host_view(obj: Any) -> np.ndarray:
    """*obj*'s memory as a one-dimensional numpy view, DLPack first, then the CUDA Array Interface."""
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _dlpack(obj)
    return _cuda_array_interface(obj)


def _at(address: int, nbytes: int, dtype: np.dtype, owner: Any, readonly: bool) -> np.ndarray:
    """*nbytes* of host memory at *address*, viewed as *dtype*; the view keeps *owner* alive."""
    if nbytes == 0:
        view = np.zeros(0, dtype)
    else:
        raw = (ctypes.c_char * nbytes).from_address(address)
        raw.owner = owner  # the memory's owner lives as long as the view does
        view = np.frombuffer(raw, dtype=np.uint8).view(dtype)
    if readonly:
        view.flags.writeable = False
    return view


def _contiguous(shape: list[int], strides: list[int] | None, unit: int) -> bool:
    if strides is None:
        return True
    for order in (reversed(range(len(shape))), range(len(shape))):
        size, ok = unit, True
        for i in order:
            if shape[i] > 1 and strides[i] != size:
                ok = False
                break
            size *= shape[i]
        if ok:
            return True
    return False


def _dlpack(obj: Any) -> np.ndarray:
    device_type, _ = obj.__dlpack_device__()
    try:  # DLPack 1.0: a versioned capsule that says whether the memory is read-only
        kwargs = {"max_version": (1, 0), "copy": False}
        capsule = obj.__dlpack__(**kwargs) if device_type == _CPU else obj.__dlpack__(stream=-1, **kwargs)
        name, versioned = b"dltensor_versioned", True
    except TypeError:  # DLPack 0.x
        capsule = obj.__dlpack__() if device_type == _CPU else obj.__dlpack__(stream=-1)
        name, versioned = b"dltensor", False
    if not _capsule_valid(capsule, name):
        raise DeviceBufferError("dlpack: invalid capsule object")
    pointer = _capsule_pointer(capsule, name)
    if versioned:
        managed = _DLManagedTensorVersioned.from_address(pointer)
        if managed.major != 1:
            raise DeviceBufferError("dlpack: unexpected version")
        readonly = bool(managed.flags & 1)
    else:
        managed, readonly = _DLManagedTensor.from_address(pointer), False
    tensor = managed.dl_tensor
    if tensor.ndim < 0:
        raise DeviceBufferError("dlpack: number of dimensions is negative")
    if tensor.ndim and not tensor.shape:
        raise DeviceBufferError("dlpack: shape is NULL")
    shape = [tensor.shape[i] for i in range(tensor.ndim)]
    if any(s < 0 for s in shape):
        raise DeviceBufferError("dlpack: shape item is negative")
    strides = [tensor.strides[i] for i in range(tensor.ndim)] if tensor.strides else None
    if not _contiguous(shape, strides, 1):
        raise DeviceBufferError("dlpack: buffer is not contiguous")
    dt = tensor.dtype
    nbytes = int(np.prod(shape, dtype=np.int64)) * ((dt.bits * dt.lanes + 7) // 8)
    dtype = np.dtype(_DL_DTYPES.get((dt.code, dt.bits), "u1") if dt.lanes == 1 else "u1")
    if dt.lanes == 2 and dt.code == 2 and (2, dt.bits) in _DL_DTYPES and dt.bits > 16:
        dtype = np.dtype(_DL_DTYPES[(5, 2 * dt.bits)])  # two float lanes: a complex number
    return _at((tensor.data or 0) + tensor.byte_offset, nbytes, dtype, capsule, readonly)


def _cuda_array_interface(obj: Any) -> np.ndarray:
    cai = obj.__cuda_array_interface__
    address, readonly = cai["data"]
    typestr, shape = cai["typestr"], list(cai["shape"])
    strides = cai.get("strides")
    if cai.get("mask") is not None:
        raise DeviceBufferError("__cuda_array_interface__: cannot handle masked arrays")
    if typestr[:1] not in "<>|" or (typestr[:1] == ">" and np.little_endian) or (typestr[:1] == "<" and not
                                                                                 np.little_endian):
        raise DeviceBufferError(f"__cuda_array_interface__: typestr {typestr!r} with non-native byte order")
    itemsize = int(typestr[2:])
    size = int(np.prod(shape, dtype=np.int64))
    if size < 0:
        raise DeviceBufferError(f"__cuda_array_interface__: buffer with negative size (shape:{tuple(shape)}, "
                                f"size:{size})")
    if not _contiguous(shape, list(strides) if strides is not None else None, itemsize):
        raise DeviceBufferError(f"__cuda_array_interface__: buffer is not contiguous (shape:{tuple(shape)}, "
                                f"strides:{tuple(strides)}, itemsize:{itemsize})")
    try:
        dtype = np.dtype("|" + typestr[1:]) if typestr[1] in "bu" and itemsize == 1 else np.dtype(typestr)
    except TypeError:
        dtype = np.dtype("u1")
    if dtype.kind == "V":
        dtype = np.dtype("u1")
    return _at(address or 0, size * itemsize, dtype, obj, bool(readonly))
