# The C types of common/record_encoder.py's batch loop for the compiled build (Cython reads this file beside the
# module; the plain source never sees it). Only _batch_records_typed is typed: the rest of the module compiles as
# ordinary Python objects.
cimport cython

@cython.locals(
    out=cython.uchar[::1], data="const unsigned char[::1]", tmpl="const unsigned char[::1]",
    tf="const unsigned char[::1]", ex="const unsigned char[::1]",
    hsize=cython.Py_ssize_t, tlen=cython.Py_ssize_t, extra_len=cython.Py_ssize_t, cap=cython.Py_ssize_t,
    end=cython.Py_ssize_t, pos=cython.Py_ssize_t, entry_total=cython.Py_ssize_t, body_len=cython.Py_ssize_t,
    body_start=cython.Py_ssize_t, body_end=cython.Py_ssize_t, entry_end=cython.Py_ssize_t,
    props_len=cython.Py_ssize_t, props_start=cython.Py_ssize_t, at=cython.Py_ssize_t,
    value_start=cython.Py_ssize_t, value_end=cython.Py_ssize_t, value_len=cython.Py_ssize_t,
    last_start=cython.Py_ssize_t, last_len=cython.Py_ssize_t, i=cython.Py_ssize_t, stored_len=cython.Py_ssize_t,
    sep=cython.Py_ssize_t, max_props=cython.Py_ssize_t, size=cython.Py_ssize_t, p=cython.Py_ssize_t, q=cython.Py_ssize_t,
    b0=cython.Py_ssize_t, b1=cython.Py_ssize_t, b2=cython.Py_ssize_t, b3=cython.Py_ssize_t,
    phys=cython.longlong,
    tags=cython.longlong, last_code=cython.longlong, crc=cython.longlong,
    plain=cython.bint, same=cython.bint, have_last=cython.bint,
)
cpdef object _batch_records_typed(object dst, long long w, long long base, object header, object src, object tfield,
                                  object extra, object sys_flag, object queue_id, long long queue_offset,
                                  object born_ts, object born_host, object now, object store_host,
                                  object tag_code_of)

@cython.locals(data="const unsigned char[::1]", count=cython.Py_ssize_t, pos=cython.Py_ssize_t, end=cython.Py_ssize_t,
               size=cython.Py_ssize_t, b0=cython.Py_ssize_t, b1=cython.Py_ssize_t, b2=cython.Py_ssize_t,
               b3=cython.Py_ssize_t)
cpdef Py_ssize_t count_batch_entries(object src) except -1

@cython.locals(n=cython.Py_ssize_t, plen=cython.Py_ssize_t, out=cython.uchar[::1], pre="const unsigned char[::1]",
               digits="const unsigned char[::1]", p=cython.Py_ssize_t, k=cython.Py_ssize_t, i=cython.Py_ssize_t,
               off=cython.ulonglong)
cpdef str _joined_ids_typed(str prefix, list offsets)
