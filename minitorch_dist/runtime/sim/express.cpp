// The sim backend's Group.sendrecv for the usual ring step, compiled (express.py builds and loads it).
//
// An Express object is bound to one sim Group as its `sendrecv`. A call does what
// sendrecv.py's express block does, step for step and in the same order (the same
// floating-point operations, so simulated times are bit for bit the same): the
// receive takes the eager message waiting at the head of its channel, the send
// leaves an eager message for its peer, the counters and the rank's clock move.
// With the trace on it records the call's event as that block does. Every other call
// (keywords, anything the Python checks would reject or
// send elsewhere, no message waiting, a tensor that is not plain) goes, before
// anything has changed, to the Python method, which does the whole exchange and
// raises the errors. So this file holds no error message a student sees.
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

PyObject* python_path(Express* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
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

// sendrecv.py's express test: both tensors plain (CPU, dense, not nested, contiguous, no negation bit, a raw
// dtype, not inference) and the waiting message's dtype and shape the receive buffer's. Layout and device
// first: the other getters throw for sparse or nested tensors (then the Python path answers).
bool plain_pair(Express* self, const at::Tensor& s, const at::Tensor& r, PyObject* head) {
  try {
    if (!s.defined() || !r.defined() || !s.is_cpu() || !r.is_cpu() || s.layout() != at::kStrided ||
        r.layout() != at::kStrided || s.is_nested() || r.is_nested() || r.is_inference())
      return false;
    long long sent = static_cast<long long>(s.nbytes());
    return reinterpret_cast<PyObject*>(torch::getTHPDtype(r.scalar_type())) == PyTuple_GET_ITEM(head, 1) &&
           shape_is(PyTuple_GET_ITEM(head, 2), r.sizes()) && r.is_contiguous() && s.is_contiguous() &&
           !r.is_neg() && !s.is_neg() && sent > 0 && sent <= self->raw_limit && raw_dtype(s.scalar_type()) &&
           static_cast<long long>(r.nbytes()) == PyBytes_GET_SIZE(PyTuple_GET_ITEM(head, 0));
  } catch (const std::exception&) {
    return false;
  }
}

PyObject* call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  Express* self = reinterpret_cast<Express*>(callable);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  auto tensor_type = reinterpret_cast<PyTypeObject*>(THPVariableClass);
  if (kwnames != nullptr || nargs < 4 || nargs > 5 || Py_TYPE(args[0]) != tensor_type ||
      Py_TYPE(args[2]) != tensor_type || !PyLong_CheckExact(args[1]) || !PyLong_CheckExact(args[3]) ||
      (nargs == 5 && !PyLong_CheckExact(args[4])))
    return python_path(self, args, nargsf, kwnames);
  long long dst = PyLong_AsLongLong(args[1]), src = PyLong_AsLongLong(args[3]);
  long long tag = nargs == 5 ? PyLong_AsLongLong(args[4]) : 0;
  if (PyErr_Occurred()) PyErr_Clear();   // a huge int: out of range below, so the Python path says so
  else if (dst >= 0 && dst < self->size && src >= 0 && src < self->size && dst != self->rank &&
           src != self->rank && tag >= 0 && tag <= self->max_tag) {
    PyObject* trace = PyObject_GetAttr(self->recorder, s_trace);
    if (trace == nullptr) return nullptr;
    int tracing = PyObject_IsTrue(trace);
    Py_DECREF(trace);
    if (tracing < 0) return nullptr;
    PyObject* counters = PyObject_GetAttr(self->recorder, s_counters);
    PyObject* by_op = counters ? PyObject_GetAttr(counters, s_by_op) : nullptr;
    Py_XDECREF(counters);
    if (by_op == nullptr) PyErr_Clear();   // counters replaced by rank code: the Python path
    PyObject* result = nullptr;
    bool express = false;
    if (by_op != nullptr && PyDict_CheckExact(by_op)) {
      if (self->channel == nullptr || dst != self->ldst || src != self->lsrc || tag != self->ltag) {
        PyObject* ch = PyObject_CallFunction(self->channel_of, "LLL", dst, src, tag);
        if (ch == nullptr || !PyTuple_CheckExact(ch) || PyTuple_GET_SIZE(ch) != 8) {
          if (ch != nullptr) PyErr_SetString(PyExc_SystemError, "sim express: a channel is a tuple of 8");
          Py_XDECREF(ch);
          Py_DECREF(by_op);
          return nullptr;
        }
        Py_XSETREF(self->channel, ch);
        self->ldst = dst, self->lsrc = src, self->ltag = tag;
      }
      PyObject* channel = self->channel;
      Py_INCREF(channel);
      PyObject *inbox = PyTuple_GET_ITEM(channel, 2), *head = nullptr;
      Py_ssize_t waiting = PyObject_Size(PyTuple_GET_ITEM(channel, 4)), queued = PyObject_Size(inbox);
      if (waiting == 0 && queued > 0) head = PySequence_GetItem(inbox, 0);
      if (head != nullptr && PyTuple_CheckExact(head) && PyTuple_GET_SIZE(head) == 5 &&
          PyBytes_CheckExact(PyTuple_GET_ITEM(head, 0)) && PyFloat_CheckExact(PyTuple_GET_ITEM(head, 3)) &&
          Py_TYPE(PyTuple_GET_ITEM(channel, 7)) == slot_type && PyFloat_CheckExact(member(self->slot, clock_at))) {
        const at::Tensor& s = THPVariable_Unpack(args[0]);
        const at::Tensor& r = THPVariable_Unpack(args[2]);
        PyObject* data = PyTuple_GET_ITEM(head, 0);
        express = plain_pair(self, s, r, head);
        if (express) {
          PyObject* count = PyDict_GetItemWithError(by_op, s_sendrecv);   // borrowed; by_op holds it
          Py_XINCREF(count);
          if (count == nullptr && PyErr_Occurred()) result = nullptr;
          else {
            try {
              result = exchange(self, channel, args[2], s, r, data, PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(head, 3)),
                                count, tag, tracing);
            } catch (const std::exception& exc) {   // not expected of plain tensors; never through C
              PyErr_SetString(PyExc_RuntimeError, exc.what());
              result = nullptr;
            }
          }
          Py_XDECREF(count);
        }
      }
      if (head == nullptr && PyErr_Occurred()) PyErr_Clear();
      Py_XDECREF(head);
      Py_DECREF(channel);
    }
    Py_XDECREF(by_op);
    if (express) return result;
  }
  return python_path(self, args, nargsf, kwnames);
}

PyObject** fields(Express* e, int* n) {
  *n = 15;
  return &e->fallback;   // the object fields, in declaration order (fallback .. array)
}

int traverse(PyObject* o, visitproc visit, void* arg) {
  int n;
  PyObject** f = fields(reinterpret_cast<Express*>(o), &n);
  for (int i = 0; i < n; i++) Py_VISIT(f[i]);
  return 0;
}

int clear(PyObject* o) {
  int n;
  PyObject** f = fields(reinterpret_cast<Express*>(o), &n);
  for (int i = 0; i < n; i++) Py_CLEAR(f[i]);
  return 0;
}

void dealloc(PyObject* o) {
  PyObject_GC_UnTrack(o);
  clear(o);
  Py_TYPE(o)->tp_free(o);
}

PyObject* make(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  auto self = reinterpret_cast<Express*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->vectorcall = call;
  self->array_n = -1;
  PyObject* o[13];
  if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOLLLLLdd", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                        &o[9], &o[10], &o[11], &o[12], &self->size, &self->rank, &self->max_tag, &self->max_in_flight,
                        &self->raw_limit, &self->alpha, &self->beta) ||
      !PyList_CheckExact(o[4]) || slot_type == nullptr || Py_TYPE(o[2]) != slot_type) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Express: call setup() first; slot a RankSlot, send_ends a list");
    Py_DECREF(self);
    return nullptr;
  }
  int n;
  PyObject** f = fields(self, &n);
  for (int i = 0; i < 13; i++) f[i] = Py_NewRef(o[i]);
  return reinterpret_cast<PyObject*>(self);
}

Py_ssize_t slot_offset(PyTypeObject* type, const char* name) {   // where a __slots__ member lives
  PyObject* d = PyDict_GetItemString(type->tp_dict, name);
  if (d == nullptr || Py_TYPE(d) != &PyMemberDescr_Type ||
      reinterpret_cast<PyMemberDescrObject*>(d)->d_member->type != T_OBJECT_EX) {
    PyErr_Format(PyExc_TypeError, "express.setup: %s.%s is not a __slots__ member", type->tp_name, name);
    return -1;
  }
  return reinterpret_cast<PyMemberDescrObject*>(d)->d_member->offset;
}

PyObject* setup(PyObject*, PyObject* args) {
  PyTypeObject *st, *ct;
  if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &st, &PyType_Type, &ct)) return nullptr;
  if ((clock_at = slot_offset(st, "clock")) < 0 || (in_flight_at = slot_offset(st, "in_flight")) < 0) return nullptr;
  Py_XSETREF(slot_type, reinterpret_cast<PyTypeObject*>(Py_NewRef(st)));
  Py_XSETREF(count_type, reinterpret_cast<PyTypeObject*>(Py_NewRef(ct)));
  Py_RETURN_NONE;
}

PyTypeObject ExpressType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyMethodDef methods[] = {{"setup", setup, METH_VARARGS, "setup(RankSlot, OpCount): the classes read in place"},
                         {nullptr, nullptr, 0, nullptr}};
PyModuleDef module = {PyModuleDef_HEAD_INIT, "_express", "The sim's compiled sendrecv (express.py).", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__express(void) {
  ExpressType.tp_name = "minitorch_dist.runtime.sim.Express";
  ExpressType.tp_doc = "Group.sendrecv(send_tensor, dst, recv_tensor, src, tag=0) on the sim backend.";
  ExpressType.tp_basicsize = sizeof(Express);
  ExpressType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
  ExpressType.tp_vectorcall_offset = offsetof(Express, vectorcall);
  ExpressType.tp_call = PyVectorcall_Call;
  ExpressType.tp_new = make;
  ExpressType.tp_traverse = traverse;
  ExpressType.tp_clear = clear;
  ExpressType.tp_dealloc = dealloc;
  if (PyType_Ready(&ExpressType) < 0) return nullptr;
  const char* counted[5] = {"calls", "messages_sent", "bytes_sent", "messages_recv", "bytes_recv"};
  for (int i = 0; i < 5; i++) names[i] = PyUnicode_InternFromString(counted[i]);
  s_in_flight = PyUnicode_InternFromString("in_flight");
  s_popleft = PyUnicode_InternFromString("popleft");
  s_append = PyUnicode_InternFromString("append");
  s_trace = PyUnicode_InternFromString("trace");
  s_counters = PyUnicode_InternFromString("counters");
  s_by_op = PyUnicode_InternFromString("by_op");
  s_sendrecv = PyUnicode_InternFromString("sendrecv");
  s_count = PyUnicode_InternFromString("count");
  s_event = PyUnicode_InternFromString("event");
  count_kwnames = Py_BuildValue("(ssss)", "sent", "recv", "bytes_sent", "bytes_recv");
  PyObject* m = PyModule_Create(&module);
  if (m == nullptr || PyModule_AddObjectRef(m, "Express", reinterpret_cast<PyObject*>(&ExpressType)) < 0) {
    Py_XDECREF(m);
    return nullptr;
  }
  return m;
}
