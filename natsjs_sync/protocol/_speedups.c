/*
 * Optional compiled fast path of the NATS parser (natsjs_sync.protocol.parser).
 *
 * scan() turns a run of complete MSG/HMSG frames into message objects in one
 * C loop and stops at the first thing it does not handle: any other
 * operation, an incomplete frame, anything malformed or over a limit. The
 * pure-Python parser then takes over from that position, so every error is
 * still raised (with its message) by Python, and the two paths give the same
 * events. Without a compiler the package works the same, only slower.
 *
 * Messages are instances of a subclass of natsjs_sync.msg.Msg: setup() reads
 * the offsets of Msg's slots once, and scan() fills the slots directly, as
 * Msg.__init__ would, without running Python code per message.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

static PyTypeObject *msg_base = NULL;
static Py_ssize_t off_subject, off_sid, off_reply, off_hdr, off_data;

static int
slot_offset(PyTypeObject *cls, const char *name, Py_ssize_t *out)
{
    PyObject *descr = PyDict_GetItemString(cls->tp_dict, name); /* borrowed */
    if (descr == NULL || !PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s has no slot %s", cls->tp_name, name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "slot %s of %s is not an object slot", name, cls->tp_name);
        return -1;
    }
    *out = member->offset;
    return 0;
}

static PyObject *
setup(PyObject *Py_UNUSED(self), PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "setup() takes the Msg class");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)cls;
    if (slot_offset(t, "subject", &off_subject) < 0 || slot_offset(t, "sid", &off_sid) < 0 ||
        slot_offset(t, "reply", &off_reply) < 0 || slot_offset(t, "raw_headers", &off_hdr) < 0 ||
        slot_offset(t, "data", &off_data) < 0) {
        return NULL;
    }
    Py_XDECREF(msg_base);
    Py_INCREF(cls);
    msg_base = t;
    Py_RETURN_NONE;
}

static PyObject *
accepts(PyObject *Py_UNUSED(self), PyObject *cls)
{
    if (msg_base != NULL && PyType_Check(cls) && PyType_IsSubtype((PyTypeObject *)cls, msg_base) &&
        ((PyTypeObject *)cls)->tp_basicsize == msg_base->tp_basicsize) {
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

static inline void
set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value) /* steals value */
{
    *(PyObject **)((char *)obj + offset) = value;
}

/* The next token of [p, end): its start and length; advances *p past it. */
static inline int
token(const char **p, const char *end, const char **start, Py_ssize_t *len)
{
    const char *q = *p;
    while (q < end && (*q == ' ' || *q == '\t')) {
        q++;
    }
    if (q >= end) {
        return 0;
    }
    const char *s = q;
    while (q < end && *q != ' ' && *q != '\t') {
        q++;
    }
    *start = s;
    *len = q - s;
    *p = q;
    return 1;
}

static inline int
number(const char *s, Py_ssize_t len, Py_ssize_t *out)
{
    if (len == 0 || len > 18) {
        return 0;
    }
    Py_ssize_t v = 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return 0;
        }
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 1;
}

static PyObject *
scan(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "scan(buf, pos, cls, max_payload, max_control_line)");
        return NULL;
    }
    PyObject *buf = args[0];
    if (!PyBytes_Check(buf) || !PyType_Check(args[2]) || msg_base == NULL) {
        PyErr_SetString(PyExc_TypeError, "scan() needs bytes and a Msg class after setup()");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t max_payload = PyLong_AsSsize_t(args[3]);
    Py_ssize_t max_control = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[2];
    const char *data = PyBytes_AS_STRING(buf);
    Py_ssize_t n = PyBytes_GET_SIZE(buf);
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    while (pos < n) {
        const char *p = data + pos;
        Py_ssize_t left = n - pos;
        int with_headers;
        if (left >= 4 && memcmp(p, "MSG ", 4) == 0) {
            with_headers = 0;
            p += 4;
        } else if (left >= 5 && memcmp(p, "HMSG ", 5) == 0) {
            with_headers = 1;
            p += 5;
        } else {
            break;
        }
        Py_ssize_t scan_len = left < max_control + 2 ? left : max_control + 2;
        const char *cr = memchr(data + pos, '\r', scan_len);
        if (cr == NULL || cr + 1 >= data + n || cr[1] != '\n') {
            break;
        }
        const char *tok[5];
        Py_ssize_t tlen[5];
        int ntok = 0;
        while (ntok < 5 && token(&p, cr, &tok[ntok], &tlen[ntok])) {
            ntok++;
        }
        const char *extra;
        Py_ssize_t extra_len;
        if (token(&p, cr, &extra, &extra_len)) {
            break; /* too many arguments: Python says what is wrong */
        }
        Py_ssize_t sid, hlen = 0, total;
        int has_reply;
        if (!with_headers && (ntok == 3 || ntok == 4)) {
            has_reply = ntok == 4;
            if (!number(tok[ntok - 1], tlen[ntok - 1], &total)) {
                break;
            }
        } else if (with_headers && (ntok == 4 || ntok == 5)) {
            has_reply = ntok == 5;
            if (!number(tok[ntok - 2], tlen[ntok - 2], &hlen) || !number(tok[ntok - 1], tlen[ntok - 1], &total) ||
                hlen > total || hlen < 10) {
                break;
            }
        } else {
            break;
        }
        if (!number(tok[1], tlen[1], &sid) || total > max_payload) {
            break;
        }
        const char *start = cr + 2;
        if (start + total + 2 > data + n || start[total] != '\r' || start[total + 1] != '\n') {
            break; /* incomplete (or malformed): the Python parser decides */
        }
        PyObject *subject = PyUnicode_DecodeUTF8(tok[0], tlen[0], NULL);
        if (subject == NULL) {
            PyErr_Clear();
            break;
        }
        PyObject *reply;
        if (has_reply) {
            reply = PyUnicode_DecodeUTF8(tok[2], tlen[2], NULL);
            if (reply == NULL) {
                PyErr_Clear();
                Py_DECREF(subject);
                break;
            }
        } else {
            reply = PyUnicode_New(0, 0); /* "": no reply subject, as Msg.__init__ stores it */
            if (reply == NULL) {
                Py_DECREF(subject);
                Py_DECREF(out);
                return NULL;
            }
        }
        PyObject *hdr;
        if (with_headers) {
            hdr = PyBytes_FromStringAndSize(start, hlen);
        } else {
            hdr = Py_None;
            Py_INCREF(hdr);
        }
        PyObject *payload = PyBytes_FromStringAndSize(start + hlen, total - hlen);
        PyObject *sid_obj = PyLong_FromSsize_t(sid);
        PyObject *msg = cls->tp_alloc(cls, 0);
        if (hdr == NULL || payload == NULL || sid_obj == NULL || msg == NULL) {
            Py_DECREF(subject);
            Py_DECREF(reply);
            Py_XDECREF(hdr);
            Py_XDECREF(payload);
            Py_XDECREF(sid_obj);
            Py_XDECREF(msg);
            Py_DECREF(out);
            return NULL;
        }
        set_slot(msg, off_subject, subject);
        set_slot(msg, off_sid, sid_obj);
        set_slot(msg, off_reply, reply);
        set_slot(msg, off_hdr, hdr);
        set_slot(msg, off_data, payload);
        if (PyList_Append(out, msg) < 0) {
            Py_DECREF(msg);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(msg);
        pos = (start + total + 2) - data;
    }
    PyObject *newpos = PyLong_FromSsize_t(pos);
    if (newpos == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, out, newpos);
    Py_DECREF(out);
    Py_DECREF(newpos);
    return result;
}

/* Digits [p, end) as a sequence number; -1 for an empty, non-digit or too long token. */
static long long
parse_seq(const char *p, const char *end)
{
    if (p == end || end - p > 18) {
        return -1;
    }
    long long v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9') {
            return -1;
        }
        v = v * 10 + (*p - '0');
    }
    return v;
}

/*
 * ack_tail(reply, prefix) -> (stream_seq, consumer_seq) | None
 *
 * For "<prefix>.<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>"
 * (exactly five tokens after the prefix), the two sequences; None for any
 * other subject. The Python twin in protocol/jetstream/ackreply.py is the
 * reference; this one saves an ordered consumer a split and two int() calls
 * per message.
 */
static PyObject *
ack_tail(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "ack_tail(reply: str, prefix: str)");
        return NULL;
    }
    Py_ssize_t rlen, plen;
    const char *r = PyUnicode_AsUTF8AndSize(args[0], &rlen);
    const char *pre = PyUnicode_AsUTF8AndSize(args[1], &plen);
    if (r == NULL || pre == NULL) {
        return NULL;
    }
    if (rlen <= plen + 1 || r[plen] != '.' || memcmp(r, pre, (size_t)plen) != 0) {
        Py_RETURN_NONE;
    }
    const char *dots[5];
    int n = 0;
    const char *end = r + rlen;
    for (const char *c = r + plen; c < end; c++) {
        if (*c == '.') {
            if (n == 5) {
                Py_RETURN_NONE;
            }
            dots[n++] = c;
        }
    }
    if (n != 5 || dots[4] + 1 == end) {
        Py_RETURN_NONE;
    }
    for (int i = 0; i < 4; i++) {
        if (dots[i] + 1 == dots[i + 1]) {
            Py_RETURN_NONE; /* an empty token */
        }
    }
    long long sseq = parse_seq(dots[1] + 1, dots[2]);
    long long cseq = parse_seq(dots[2] + 1, dots[3]);
    if (sseq < 0 || cseq < 0) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(LL)", sseq, cseq);
}

/*
 * append_pub(buffer, head, payload) -> len(buffer)
 *
 * buffer += head + payload + b"\r\n" in one step, without the two
 * intermediate bytes objects: the publish hot path. One C call with no Python
 * code inside, so under the GIL it is as atomic as the bytearray append it
 * replaces (see _core/writer.py). The Python twin is protocol.commands.append_pub.
 */
static PyObject *
append_pub(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyByteArray_CheckExact(args[0]) || !PyBytes_Check(args[1]) || !PyBytes_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "append_pub(buffer: bytearray, head: bytes, payload: bytes)");
        return NULL;
    }
    PyObject *buffer = args[0];
    Py_ssize_t old = PyByteArray_GET_SIZE(buffer);
    Py_ssize_t lh = PyBytes_GET_SIZE(args[1]);
    Py_ssize_t lp = PyBytes_GET_SIZE(args[2]);
    if (lh > PY_SSIZE_T_MAX - old - lp - 2) {
        return PyErr_NoMemory();
    }
    if (PyByteArray_Resize(buffer, old + lh + lp + 2) < 0) {
        return NULL;
    }
    char *at = PyByteArray_AS_STRING(buffer) + old;
    memcpy(at, PyBytes_AS_STRING(args[1]), (size_t)lh);
    memcpy(at + lh, PyBytes_AS_STRING(args[2]), (size_t)lp);
    at[lh + lp] = '\r';
    at[lh + lp + 1] = '\n';
    return PyLong_FromSsize_t(old + lh + lp + 2);
}

static PyMethodDef methods[] = {
    {"setup", (PyCFunction)setup, METH_O, "Read the slot offsets of the Msg class."},
    {"accepts", (PyCFunction)accepts, METH_O, "Whether scan() can build instances of this class."},
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(buf, pos, cls, max_payload, max_control_line) -> (messages, new_pos)"},
    {"append_pub", (PyCFunction)(void (*)(void))append_pub, METH_FASTCALL,
     "append_pub(buffer, head, payload) -> len(buffer): buffer += head + payload + CRLF"},
    {"ack_tail", (PyCFunction)(void (*)(void))ack_tail, METH_FASTCALL,
     "ack_tail(reply, prefix) -> (stream_seq, consumer_seq) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups", "Compiled fast path of the NATS parser.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module);
}
