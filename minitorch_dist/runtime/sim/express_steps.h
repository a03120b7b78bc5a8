// The steps of one compiled sendrecv (express.cpp's object and its exchange): included by express.cpp only.
#pragma once

#include <Python.h>
#include <structmember.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Size.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstring>
#include <exception>

namespace {

struct Express {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  // the Group's Python sendrecv; (dst, src, tag) -> channel tuple (sendrecv.py); the rank's slot
  PyObject *fallback, *channel_of, *slot, *send_port, *send_ends, *yield_turn, *me;
  PyObject *book_transfer, *book_after, *horizon, *recorder, *array_of, *name;   // name: the group's
  PyObject *channel, *array;        // the last call's channel; the ctypes array type of array_n bytes
  long long ldst, lsrc, ltag, array_n;
  long long size, rank, max_tag, max_in_flight, raw_limit;
  double alpha, beta;
};

PyTypeObject* slot_type;            // scheduler.RankSlot: clock and in_flight are read in place
Py_ssize_t clock_at, in_flight_at;
PyTypeObject* count_type;           // observe.trace.OpCount: its counts live in its __dict__
PyObject* names[5];                 // calls, messages_sent, bytes_sent, messages_recv, bytes_recv
PyObject *s_in_flight, *s_popleft, *s_append, *s_trace, *s_counters, *s_by_op, *s_sendrecv, *s_count, *s_event;
PyObject* count_kwnames;

inline PyObject*& member(PyObject* o, Py_ssize_t at) { return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + at); }

bool raw_dtype(at::ScalarType t) {   // payloads.RAW_DTYPES
  switch (t) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16: case at::kChar: case at::kByte:
    case at::kShort: case at::kInt: case at::kLong: case at::kBool: case at::kUInt16: case at::kUInt32:
    case at::kUInt64: case at::kFloat8_e4m3fn: case at::kFloat8_e5m2:
      return true;
    default:
      return false;
  }
}

// an int plus delta, or nullptr when `v` is not a plain int of a modest size (then Python adds)
PyObject* plus(PyObject* v, long long delta) {
  if (v == nullptr || !PyLong_CheckExact(v)) return nullptr;
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (overflow || x >= (1LL << 62) || x <= -(1LL << 62)) return nullptr;
  return PyLong_FromLongLong(x + delta);
}

// obj.name += delta, as Python does it; `field` (a RankSlot's int, by offset) in place when given
bool add_to(PyObject* obj, PyObject** field, PyObject* name, long long delta) {
  if (field != nullptr) {
    PyObject* sum = plus(*field, delta);
    if (sum != nullptr) {
      Py_SETREF(*field, sum);
      return true;
    }
  }
  PyObject* old = PyObject_GetAttr(obj, name);
  if (old == nullptr) return false;
  PyObject* d = PyLong_FromLongLong(delta);
  PyObject* sum = d ? PyNumber_InPlaceAdd(old, d) : nullptr;
  Py_DECREF(old);
  Py_XDECREF(d);
  if (sum == nullptr) return false;
  int failed = PyObject_SetAttr(obj, name, sum);
  Py_DECREF(sum);
  return failed == 0;
}

bool shape_is(PyObject* shape, c10::IntArrayRef sizes) {
  if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != static_cast<Py_ssize_t>(sizes.size())) return false;
  for (size_t i = 0; i < sizes.size(); i++) {
    PyObject* d = PyTuple_GET_ITEM(shape, i);
    if (!PyLong_CheckExact(d) || PyLong_AsLongLong(d) != sizes[i]) { PyErr_Clear(); return false; }
  }
  return true;
}

PyObject* new_size(c10::IntArrayRef sizes) {   // a torch.Size, as tensor.shape gives
  PyObject* shape = THPSizeType.tp_alloc(&THPSizeType, static_cast<Py_ssize_t>(sizes.size()));
  for (size_t i = 0; shape && i < sizes.size(); i++) {
    PyObject* d = PyLong_FromLongLong(sizes[i]);
    if (d == nullptr) Py_CLEAR(shape);
    else PyTuple_SET_ITEM(shape, i, d);
  }
  return shape;
}

// the port timetables as sendrecv.py books them (its inlined ports.book_after, else ports.book_transfer)
bool book(Express* self, PyObject* channel, double posted, double duration, double* end) {
  PyObject *send_ends = self->send_ends, *recv_ends = PyTuple_GET_ITEM(channel, 6);
  Py_ssize_t ns = PyList_GET_SIZE(send_ends), nr = PyList_GET_SIZE(recv_ends);
  if (duration > 0 && ns && nr && PyFloat_CheckExact(PyList_GET_ITEM(send_ends, ns - 1)) &&
      PyFloat_AS_DOUBLE(PyList_GET_ITEM(send_ends, ns - 1)) == posted &&
      PyFloat_CheckExact(PyList_GET_ITEM(recv_ends, nr - 1))) {
    double last_end = PyFloat_AS_DOUBLE(PyList_GET_ITEM(recv_ends, nr - 1));
    if (last_end <= posted) {
      *end = posted + duration;
      PyObject* e = PyFloat_FromDouble(*end);
      if (e == nullptr) return false;
      if (last_end == posted) {
        Py_INCREF(e);
        PyList_SetItem(recv_ends, nr - 1, e);
        PyList_SetItem(send_ends, ns - 1, e);
        return true;
      }
      PyList_SetItem(send_ends, ns - 1, e);
      PyObject* r = PyObject_CallFunction(self->book_after, "OddO", PyTuple_GET_ITEM(channel, 5), posted, *end,
                                          self->horizon);
      Py_XDECREF(r);
      return r != nullptr;
    }
  }
  PyObject* r = PyObject_CallFunction(self->book_transfer, "OOddO", self->send_port, PyTuple_GET_ITEM(channel, 5),
                                      posted, duration, self->horizon);
  if (r == nullptr) return false;
  double start = PyFloat_AsDouble(r);
  Py_DECREF(r);
  *end = start + duration;
  return !(start == -1.0 && PyErr_Occurred());
}

// the exchange itself, once every check passed: the receive, the send, the counters, the clock
PyObject* exchange(Express* self, PyObject* channel, PyObject* recv, const at::Tensor& s, const at::Tensor& r,
                   PyObject* data, double recv_end, PyObject* count, long long tag, bool tracing) {
  PyObject *slot = self->slot, *src_slot = PyTuple_GET_ITEM(channel, 7);
  Py_ssize_t n = PyBytes_GET_SIZE(data);
  long long sent = static_cast<long long>(s.nbytes());
  PyObject* popped = PyObject_CallMethodNoArgs(PyTuple_GET_ITEM(channel, 2), s_popleft);   // keeps `data`
  if (popped == nullptr) return nullptr;
  if (!add_to(src_slot, &member(src_slot, in_flight_at), s_in_flight, -1)) { Py_DECREF(popped); return nullptr; }
  std::memcpy(r.data_ptr(), PyBytes_AS_STRING(data), n);
  Py_DECREF(popped);
  r.unsafeGetTensorImpl()->bump_version();
  double posted = PyFloat_AS_DOUBLE(member(slot, clock_at)), end;
  if (posted > recv_end) recv_end = posted;
  if (!book(self, channel, posted, self->alpha + static_cast<double>(sent) * self->beta, &end)) return nullptr;
  if (self->array_n != sent) {
    PyObject* a = PyObject_CallFunction(self->array_of, "L", sent);
    if (a == nullptr) return nullptr;
    Py_XSETREF(self->array, a);
    self->array_n = sent;
  }
  PyObject* message = Py_BuildValue("(NONNO)", PyBytes_FromStringAndSize(static_cast<const char*>(s.data_ptr()), sent),
                                    reinterpret_cast<PyObject*>(torch::getTHPDtype(s.scalar_type())),
                                    new_size(s.sizes()), PyFloat_FromDouble(end), self->array);
  if (message == nullptr) return nullptr;
  PyObject* appended = PyObject_CallMethodOneArg(PyTuple_GET_ITEM(channel, 3), s_append, message);
  Py_DECREF(message);
  if (appended == nullptr) return nullptr;
  Py_DECREF(appended);
  if (!add_to(slot, &member(slot, in_flight_at), s_in_flight, 1)) return nullptr;
  if (PyLong_AsLongLong(member(slot, in_flight_at)) > self->max_in_flight) {   // far ahead: others run first
    PyObject* r2 = PyObject_CallOneArg(self->yield_turn, self->me);
    if (r2 == nullptr) return nullptr;
    Py_DECREF(r2);
  }
  if (count == nullptr) {           // recorder.count("sendrecv", sent=1, recv=1, bytes_sent=, bytes_recv=)
    PyObject* call[6] = {self->recorder, s_sendrecv, PyLong_FromLong(1), PyLong_FromLong(1),
                         PyLong_FromLongLong(sent), PyLong_FromSsize_t(n)};
    PyObject* r2 = PyObject_VectorcallMethod(s_count, call, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, count_kwnames);
    for (int i = 2; i < 6; i++) Py_XDECREF(call[i]);
    if (r2 == nullptr) return nullptr;
    Py_DECREF(r2);
  } else {
    long long deltas[5] = {1, 1, sent, 1, static_cast<long long>(n)};
    // a plain OpCount: read and write its __dict__ (what count.calls += 1 does), else Python's way
    PyObject* dict = Py_TYPE(count) == count_type ? PyObject_GenericGetDict(count, nullptr) : nullptr;
    if (dict == nullptr) PyErr_Clear();
    for (int i = 0; i < 5; i++) {
      PyObject* sum = dict ? plus(PyDict_GetItemWithError(dict, names[i]), deltas[i]) : nullptr;
      bool ok = sum ? PyDict_SetItem(dict, names[i], sum) == 0 : add_to(count, nullptr, names[i], deltas[i]);
      Py_XDECREF(sum);
      if (!ok) {
        Py_XDECREF(dict);
        return nullptr;
      }
    }
    Py_XDECREF(dict);
  }
  if (recv_end > end) end = recv_end;
  PyObject*& clock = member(slot, clock_at);
  if (!PyFloat_CheckExact(clock) || end > PyFloat_AS_DOUBLE(clock)) {
    PyObject* c = PyFloat_FromDouble(end);
    if (c == nullptr) return nullptr;
    Py_SETREF(clock, c);
  }
  if (tracing) {                    // recorder.event("sendrecv", dst, tag, bytes, posted, clock, group name)
    PyObject* call[8] = {self->recorder, s_sendrecv, PyTuple_GET_ITEM(channel, 1), PyLong_FromLongLong(tag),
                         PyLong_FromLongLong(sent + n), PyFloat_FromDouble(posted), Py_NewRef(clock), self->name};
    PyObject* r2 = call[3] && call[4] && call[5]
        ? PyObject_VectorcallMethod(s_event, call, 8 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr) : nullptr;
    for (int i = 3; i < 7; i++) Py_XDECREF(call[i]);
    if (r2 == nullptr) return nullptr;
    Py_DECREF(r2);
  }
  Py_INCREF(recv);
  return recv;
}

}  // namespace
