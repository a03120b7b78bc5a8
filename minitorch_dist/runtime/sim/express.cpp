// The sim backend's Group.sendrecv for the usual ring step, compiled (express.py builds and loads it).
//
// An Express object is bound to one sim Group as its `sendrecv`. A call does what
// sendrecv.py's express block does, step for step and in the same order (the same
// floating-point operations, so simulated times are bit for bit the same): the
// receive takes the eager message waiting at the head of its channel, the send
// leaves an eager message for its peer, the counters and the rank's clock move.
// With the trace on it records the call's event as that block does. Every other call
// (keywords, anything the Python checks would reject or send elsewhere, no message
// waiting, a tensor that is not plain) goes, before anything has changed, to the
// Python method, which does the whole exchange and raises the errors. So this code
// holds no error message a student sees.
//
// This file: the object (its arguments, its checks, the module). express_steps.h: the
// exchange once the checks have passed (ports, message, counters, clock, event).
#include "express_steps.h"

namespace {

PyObject* python_path(Express* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
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
