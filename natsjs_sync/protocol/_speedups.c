/*
 * Optional compiled fast paths: the NATS parser (natsjs_sync.protocol.parser),
 * the reader thread's delivery of messages and the consumer's take
 * (natsjs_sync._core.inlet), a plain publish (natsjs_sync._core.outlet) and a
 * few per-message helpers; each has a pure-Python twin that is the reference.
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

/* The next token of [p, end): its start and length; advances *p past it.
 * 1: a token, 0: none left, -1: a bare LF (the Python twin refuses the line).
 * Separators are spaces and tabs only, as nats-server and nats.go split a
 * control line: any other byte (a vertical tab, a form feed, a NUL) belongs
 * to the token, since the server accepts it in a subject. */
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
        if (*q == '\n') {
            return -1;
        }
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

/* The last header block scan() made, kept for the next call (up to this size). */
static PyObject *shared_hdr = NULL;
#define SHARED_HDR_MAX 512

static PyObject *
scan(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "scan(buf, pos, cls, max_payload, max_control_line)");
        return NULL;
    }
    PyObject *buf = args[0];
    /* Every slot is written at Msg's offsets: only Msg subclasses without
     * slots of their own (what accepts() says yes to) have them there. */
    if (!PyBytes_Check(buf) || !PyType_Check(args[2]) || msg_base == NULL ||
        !PyType_IsSubtype((PyTypeObject *)args[2], msg_base) ||
        ((PyTypeObject *)args[2])->tp_basicsize != msg_base->tp_basicsize) {
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
    if (pos < 0 || pos > n || max_payload < 0 || max_control < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "scan() needs 0 <= pos <= len(buf) and limits that are not negative");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    /* The subject of the previous message (a read often holds many of one
     * subject): reused when the bytes match, instead of decoding again. */
    PyObject *last_subject = NULL;
    const char *last_raw = NULL;
    Py_ssize_t last_len = -1;
    /* Likewise the header block of the previous HMSG: a publisher's messages
     * often carry the same one (a content type), and one shared bytes object
     * is hashed once for every reader that looks it up, and found by identity
     * (bytes are immutable, so sharing it is invisible otherwise). It carries
     * over from the previous call (any parser's: the GIL is held throughout). */
    PyObject *last_hdr = shared_hdr;
    Py_XINCREF(last_hdr);
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
        /* A control line of at most max_control bytes (the twin's limit): its
         * CR is among the first max_control + 1 bytes. */
        Py_ssize_t scan_len = max_control < left ? max_control + 1 : left;
        const char *cr = memchr(data + pos, '\r', (size_t)scan_len);
        if (cr == NULL || cr + 1 >= data + n || cr[1] != '\n') {
            break;
        }
        const char *tok[5];
        Py_ssize_t tlen[5];
        int ntok = 0, got = 0;
        while (ntok < 5 && (got = token(&p, cr, &tok[ntok], &tlen[ntok])) > 0) {
            ntok++;
        }
        if (ntok < 5 && got < 0) {
            break; /* a bare LF: Python says what is wrong */
        }
        const char *extra;
        Py_ssize_t extra_len;
        if (token(&p, cr, &extra, &extra_len) != 0) {
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
                break; /* a header block too short to be one: the Python twin decides */
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
        PyObject *subject;
        if (tlen[0] == last_len && memcmp(tok[0], last_raw, (size_t)last_len) == 0) {
            subject = last_subject;
            Py_INCREF(subject);
        } else {
            /* Bytes that are not UTF-8 become lone surrogates that encode back
             * to them (the Python twin's rule): the server accepts such
             * subjects, so they must not stop the connection. */
            subject = PyUnicode_DecodeUTF8(tok[0], tlen[0], "surrogateescape");
            if (subject == NULL) {
                PyErr_Clear();
                break;
            }
            Py_INCREF(subject);
            Py_XSETREF(last_subject, subject);
            last_raw = tok[0];
            last_len = tlen[0];
        }
        PyObject *reply;
        if (has_reply) {
            reply = PyUnicode_DecodeUTF8(tok[2], tlen[2], "surrogateescape");
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
                Py_XDECREF(last_subject);
                Py_XDECREF(last_hdr);
                return NULL;
            }
        }
        PyObject *hdr;
        if (with_headers) {
            if (last_hdr != NULL && PyBytes_GET_SIZE(last_hdr) == hlen &&
                memcmp(PyBytes_AS_STRING(last_hdr), start, (size_t)hlen) == 0) {
                hdr = last_hdr;
                Py_INCREF(hdr);
            } else {
                hdr = PyBytes_FromStringAndSize(start, hlen);
                if (hdr != NULL) {
                    Py_INCREF(hdr);
                    Py_XSETREF(last_hdr, hdr);
                }
            }
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
            Py_XDECREF(last_subject);
            Py_XDECREF(last_hdr);
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
            Py_XDECREF(last_subject);
            Py_XDECREF(last_hdr);
            return NULL;
        }
        Py_DECREF(msg);
        pos = (start + total + 2) - data;
    }
    Py_XDECREF(last_subject);
    if (last_hdr != NULL && last_hdr != shared_hdr && PyBytes_GET_SIZE(last_hdr) <= SHARED_HDR_MAX) {
        Py_INCREF(last_hdr);
        Py_XSETREF(shared_hdr, last_hdr);
    }
    Py_XDECREF(last_hdr);
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
static PyObject *ack_tail_of(const char *r, Py_ssize_t rlen, const char *pre, Py_ssize_t plen);

static PyObject *
ack_tail(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "ack_tail(reply: str, prefix: str)");
        return NULL;
    }
    Py_ssize_t rlen, plen;
    PyObject *escaped = NULL;
    const char *r = PyUnicode_AsUTF8AndSize(args[0], &rlen);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        /* A reply subject that was not UTF-8 on the wire (decoded with
         * surrogateescape): its bytes, as the Python twin sees its text. */
        PyErr_Clear();
        escaped = PyUnicode_AsEncodedString(args[0], "utf-8", "surrogateescape");
        if (escaped == NULL) {
            return NULL;
        }
        r = PyBytes_AS_STRING(escaped);
        rlen = PyBytes_GET_SIZE(escaped);
    }
    const char *pre = r == NULL ? NULL : PyUnicode_AsUTF8AndSize(args[1], &plen);
    if (r == NULL || pre == NULL) {
        Py_XDECREF(escaped);
        return NULL;
    }
    PyObject *result = ack_tail_of(r, rlen, pre, plen);
    Py_XDECREF(escaped);
    return result;
}

static PyObject *
ack_tail_of(const char *r, Py_ssize_t rlen, const char *pre, Py_ssize_t plen)
{
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

/* The payload size of a message: its data slot when it is bytes, else len(). */
static inline Py_ssize_t
payload_size(PyObject *msg)
{
    PyObject *data = *(PyObject **)((char *)msg + off_data);
    if (data == NULL) {
        return 0;
    }
    if (PyBytes_CheckExact(data)) {
        return PyBytes_GET_SIZE(data);
    }
    return PyObject_Length(data);
}

static PyObject *str_in_msgs, *str_in_bytes; /* interned at import */

/* stats.<name> += n */
static int
add_to(PyObject *stats, PyObject *name, Py_ssize_t n)
{
    PyObject *old = PyObject_GetAttr(stats, name);
    if (old == NULL) {
        return -1;
    }
    PyObject *delta = PyLong_FromSsize_t(n);
    if (delta == NULL) {
        Py_DECREF(old);
        return -1;
    }
    PyObject *sum = PyNumber_Add(old, delta);
    Py_DECREF(old);
    Py_DECREF(delta);
    if (sum == NULL) {
        return -1;
    }
    int rc = PyObject_SetAttr(stats, name, sum);
    Py_DECREF(sum);
    return rc;
}

/*
 * Feed(parser, buf, cls, max_payload, max_control_line): a reader's
 * parser.feed(data) in one call for the common read (the Python twin, and
 * the reference, is natsjs_sync.protocol.parser.Parser.feed): data is bytes,
 * the parser is not broken, nothing is left over (buf, its bytearray, is
 * empty) and no payload is pending: scan() takes it; whatever follows the
 * whole messages goes on in parser._parse_rest. Any other read is
 * parser.feed's. cls and the limits are the parser's, fixed when it was made.
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *parser, *buf, *cls, *max_payload, *max_control;
} Feed;

static PyObject *str_feed, *str_parse_rest, *str_pending;
static PyObject *str_broken; /* interned at import, with the Sender's names */

static PyObject *
feed_call(Feed *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "feed takes the bytes read");
        return NULL;
    }
    if (self->parser == NULL) {
        PyErr_SetString(PyExc_TypeError, "Feed was not initialised");
        return NULL;
    }
    PyObject *data = args[0];
    if (!PyBytes_CheckExact(data) || !PyByteArray_Check(self->buf) || PyByteArray_GET_SIZE(self->buf) != 0) {
        return PyObject_CallMethodOneArg(self->parser, str_feed, data);
    }
    PyObject *broken = PyObject_GetAttr(self->parser, str_broken);
    if (broken == NULL) {
        return NULL;
    }
    PyObject *pending = broken == Py_None ? PyObject_GetAttr(self->parser, str_pending) : NULL;
    Py_DECREF(broken);
    if (pending == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        return PyObject_CallMethodOneArg(self->parser, str_feed, data); /* broken: it raises */
    }
    int clean = pending == Py_None;
    Py_DECREF(pending);
    if (!clean) {
        return PyObject_CallMethodOneArg(self->parser, str_feed, data);
    }
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL) {
        return NULL;
    }
    PyObject *scan_args[] = {data, zero, self->cls, self->max_payload, self->max_control};
    PyObject *res = scan(NULL, scan_args, 5);
    Py_DECREF(zero);
    if (res == NULL) {
        return NULL;
    }
    /* scan returns (out, pos) */
    PyObject *out = PyTuple_GET_ITEM(res, 0);
    PyObject *pos = PyTuple_GET_ITEM(res, 1);
    Py_ssize_t at = PyLong_AsSsize_t(pos);
    if (at == -1 && PyErr_Occurred()) {
        Py_DECREF(res);
        return NULL;
    }
    PyObject *result;
    if (at == PyBytes_GET_SIZE(data)) {
        result = Py_NewRef(out);
    } else {
        PyObject *rest_args[] = {self->parser, data, out, pos};
        result = PyObject_VectorcallMethod(str_parse_rest, rest_args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    Py_DECREF(res);
    return result;
}

static int
feed_traverse(Feed *self, visitproc visit, void *arg)
{
    Py_VISIT(self->parser);
    Py_VISIT(self->buf);
    Py_VISIT(self->cls);
    Py_VISIT(self->max_payload);
    Py_VISIT(self->max_control);
    return 0;
}

static int
feed_clear(Feed *self)
{
    Py_CLEAR(self->parser);
    Py_CLEAR(self->buf);
    Py_CLEAR(self->cls);
    Py_CLEAR(self->max_payload);
    Py_CLEAR(self->max_control);
    return 0;
}

static void
feed_dealloc(Feed *self)
{
    PyObject_GC_UnTrack(self);
    feed_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
feed_init(Feed *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"parser", "buf", "cls", "max_payload", "max_control_line", NULL};
    PyObject *parser, *buf, *cls, *max_payload, *max_control;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O!O!O!", kwlist, &parser, &PyByteArray_Type, &buf,
                                     &PyType_Type, &cls, &PyLong_Type, &max_payload, &PyLong_Type, &max_control)) {
        return -1;
    }
    if (msg_base == NULL || !PyType_IsSubtype((PyTypeObject *)cls, msg_base) ||
        ((PyTypeObject *)cls)->tp_basicsize != msg_base->tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "Feed needs a Msg class after setup()");
        return -1;
    }
    PyObject *refs[] = {parser, buf, cls, max_payload, max_control};
    PyObject **slots[] = {&self->parser, &self->buf, &self->cls, &self->max_payload, &self->max_control};
    for (int i = 0; i < 5; i++) {
        Py_INCREF(refs[i]);
        Py_XSETREF(*slots[i], refs[i]);
    }
    return 0;
}

static PyObject *
feed_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    Feed *self = (Feed *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->vectorcall = (vectorcallfunc)feed_call;
    }
    return (PyObject *)self;
}

static PyTypeObject FeedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "natsjs_sync.protocol._speedups.Feed",
    .tp_basicsize = sizeof(Feed),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Feed, vectorcall),
    .tp_doc = "Feed(parser, buf, cls, max_payload, max_control_line): a reader's parser.feed in one call.",
    .tp_new = feed_new,
    .tp_init = (initproc)feed_init,
    .tp_dealloc = (destructor)feed_dealloc,
    .tp_traverse = (traverseproc)feed_traverse,
    .tp_clear = (inquiry)feed_clear,
    .tp_call = PyVectorcall_Call,
};

/*
 * route_run(events, start, routes, cls, stats) -> stop
 *
 * The reader thread's inner loop. From events[start], the messages (instances
 * of exactly cls) up to the first event that is not one are a run; stop is
 * that event's index (len(events) when all were messages). The run is counted
 * in stats.in_msgs and stats.in_bytes first (a message a user is handed was
 * counted before), then each message goes to routes.get(msg.sid), if any.
 * What comes after a PING, PONG or INFO stays after it: the caller handles
 * that event, then continues from stop + 1. The Python twin is
 * natsjs_sync._core.inlet.route_run_py.
 */
static PyObject *
route_run(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyList_Check(args[0]) || !PyDict_Check(args[2]) || !PyType_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "route_run(events: list, start: int, routes: dict, cls: type, stats)");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[3];
    if (msg_base == NULL || !PyType_IsSubtype(cls, msg_base) || cls->tp_basicsize != msg_base->tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "route_run() needs a Msg class after setup()");
        return NULL;
    }
    PyObject *events = args[0];
    PyObject *routes = args[2];
    PyObject *stats = args[4];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (start < 0) {
        start = 0;
    }
    Py_ssize_t stop = start, nbytes = 0;
    for (; stop < PyList_GET_SIZE(events); stop++) {
        PyObject *ev = PyList_GET_ITEM(events, stop);
        if (Py_TYPE(ev) != cls) {
            break;
        }
        Py_ssize_t size = payload_size(ev);
        if (size < 0) {
            return NULL;
        }
        nbytes += size;
    }
    if (stop > start && (add_to(stats, str_in_msgs, stop - start) < 0 || add_to(stats, str_in_bytes, nbytes) < 0)) {
        return NULL;
    }
    for (Py_ssize_t i = start; i < stop && i < PyList_GET_SIZE(events); i++) {
        PyObject *ev = PyList_GET_ITEM(events, i);
        PyObject *sid = *(PyObject **)((char *)ev + off_sid);
        PyObject *route = sid == NULL ? NULL : PyDict_GetItemWithError(routes, sid); /* borrowed */
        if (route == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            continue; /* a sid nobody holds any more */
        }
        Py_INCREF(ev); /* a route may run Python code: hold what we use */
        Py_INCREF(route); /* the registry may drop it while it runs */
        PyObject *res = PyObject_CallOneArg(route, ev);
        Py_DECREF(route);
        Py_DECREF(ev);
        if (res == NULL) {
            return NULL;
        }
        Py_DECREF(res);
    }
    return PyLong_FromSsize_t(stop);
}

/*
 * ReplyRoute(mux, waiter_cls): the response inbox's route (the Python twin,
 * and the reference, is natsjs_sync._core.requests.ResponseMux.route).
 * Called with a reply, it pops the Waiter of the reply's token (the subject
 * after mux.prefix_len characters) from mux.waiting, raises mux.replied_to to
 * the waiter's end, stores the reply in the waiter and lets its lock go
 * (Waiter.set): no Python code runs for a plain Waiter. Anything else (a
 * message that is not a compiled Msg, a waiter of another class) goes to
 * mux.route itself.
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *mux;
    PyTypeObject *waiter_cls;
    Py_ssize_t off_value, off_end, off_lock;
} ReplyRoute;

static PyObject *str_waiting, *str_prefix_len, *str_replied_to, *str_route;
static PyObject *str_release; /* interned at import, with the Sender's names */

static PyObject *
reply_route_call(ReplyRoute *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "ReplyRoute takes one message");
        return NULL;
    }
    if (self->mux == NULL || self->waiter_cls == NULL) {
        PyErr_SetString(PyExc_TypeError, "ReplyRoute was not initialised");
        return NULL;
    }
    PyObject *msg = args[0];
    PyObject *subject = NULL;
    if (msg_base != NULL && Py_TYPE(msg)->tp_basicsize == msg_base->tp_basicsize && PyObject_TypeCheck(msg, msg_base)) {
        subject = *(PyObject **)((char *)msg + off_subject);
    }
    if (subject == NULL || !PyUnicode_CheckExact(subject)) {
        return PyObject_CallMethodOneArg(self->mux, str_route, msg);
    }
    PyObject *waiting = PyObject_GetAttr(self->mux, str_waiting);
    PyObject *prefix_len = waiting == NULL ? NULL : PyObject_GetAttr(self->mux, str_prefix_len);
    if (prefix_len == NULL) {
        Py_XDECREF(waiting);
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(prefix_len);
    Py_DECREF(prefix_len);
    if (start == -1 && PyErr_Occurred()) {
        Py_DECREF(waiting);
        return NULL;
    }
    if (!PyDict_CheckExact(waiting) || start < 0) {
        Py_DECREF(waiting);
        return PyObject_CallMethodOneArg(self->mux, str_route, msg);
    }
    PyObject *token = PyUnicode_Substring(subject, start, PyUnicode_GET_LENGTH(subject));
    if (token == NULL) {
        Py_DECREF(waiting);
        return NULL;
    }
    PyObject *result = NULL;
    PyObject *waiter = PyDict_GetItemWithError(waiting, token); /* borrowed */
    if (waiter == NULL) {
        if (!PyErr_Occurred()) {
            result = Py_NewRef(Py_None); /* nobody waits for it any more (timed out) */
        }
        goto done;
    }
    if (Py_TYPE(waiter) != self->waiter_cls) {
        result = PyObject_CallMethodOneArg(self->mux, str_route, msg);
        goto done;
    }
    Py_INCREF(waiter);
    if (PyDict_DelItem(waiting, token) < 0) {
        Py_DECREF(waiter);
        goto done;
    }
    /* The server took everything written before the request: see ResponseMux.route. */
    PyObject *end = *(PyObject **)((char *)waiter + self->off_end); /* borrowed */
    PyObject *replied = end == NULL ? NULL : PyObject_GetAttr(self->mux, str_replied_to);
    int later = replied == NULL ? -1 : PyObject_RichCompareBool(end, replied, Py_GT);
    Py_XDECREF(replied);
    if (later < 0 || (later && PyObject_SetAttr(self->mux, str_replied_to, end) < 0)) {
        if (end == NULL && !PyErr_Occurred()) {
            PyErr_SetString(PyExc_AttributeError, "end");
        }
        Py_DECREF(waiter);
        goto done;
    }
    /* Waiter.set(msg): the first value stays; the lock let go once. */
    PyObject **value = (PyObject **)((char *)waiter + self->off_value);
    PyObject *lock = *(PyObject **)((char *)waiter + self->off_lock); /* borrowed */
    if (*value == Py_None && lock != NULL) {
        Py_INCREF(msg);
        Py_SETREF(*value, msg);
        Py_INCREF(lock);
        PyObject *r = PyObject_CallMethodNoArgs(lock, str_release);
        Py_DECREF(lock);
        if (r == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_RuntimeError)) { /* RuntimeError: already woken */
                Py_DECREF(waiter);
                goto done;
            }
            PyErr_Clear();
        }
        Py_XDECREF(r);
    } else if (*value == NULL || lock == NULL) {
        PyErr_SetString(PyExc_AttributeError, *value == NULL ? "value" : "_lock");
        Py_DECREF(waiter);
        goto done;
    }
    Py_DECREF(waiter);
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(token);
    Py_DECREF(waiting);
    return result;
}

static int
reply_route_traverse(ReplyRoute *self, visitproc visit, void *arg)
{
    Py_VISIT(self->mux);
    Py_VISIT(self->waiter_cls);
    return 0;
}

static int
reply_route_clear(ReplyRoute *self)
{
    Py_CLEAR(self->mux);
    Py_CLEAR(self->waiter_cls);
    return 0;
}

static void
reply_route_dealloc(ReplyRoute *self)
{
    PyObject_GC_UnTrack(self);
    reply_route_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
reply_route_init(ReplyRoute *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"mux", "waiter_cls", NULL};
    PyObject *mux, *cls;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!", kwlist, &mux, &PyType_Type, &cls)) {
        return -1;
    }
    PyTypeObject *t = (PyTypeObject *)cls;
    /* The offsets go with their class: a refused __init__ leaves both as they were, and
       the old references go only once the new ones are in place (a release may run code). */
    Py_ssize_t off_value, off_end, off_lock;
    if (slot_offset(t, "value", &off_value) < 0 || slot_offset(t, "end", &off_end) < 0 ||
        slot_offset(t, "_lock", &off_lock) < 0) {
        return -1;
    }
    PyObject *old_mux = self->mux;
    PyTypeObject *old_cls = self->waiter_cls;
    Py_INCREF(mux);
    Py_INCREF(cls);
    self->mux = mux;
    self->waiter_cls = t;
    self->off_value = off_value;
    self->off_end = off_end;
    self->off_lock = off_lock;
    Py_XDECREF(old_mux);
    Py_XDECREF(old_cls);
    return 0;
}

static PyObject *
reply_route_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    ReplyRoute *self = (ReplyRoute *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->vectorcall = (vectorcallfunc)reply_route_call;
    }
    return (PyObject *)self;
}

/*
 * route.prepare() -> (token, waiter, reply): ResponseMux.prepare_one in one
 * call (its Python body is the reference): the next token, a new waiter of
 * the route's class made as Waiter.__init__ makes one (a threading.Lock,
 * taken; no value; end 0), and the reply subject's bytes (mux.prefix_bytes
 * and the token). The waiter is not entered in mux.waiting: the caller does
 * it, with no check point between that and the try that forgets it (a signal
 * handler's exception raised as this call returns must leave nothing there).
 */
static PyObject *str_tokens, *str_prefix_bytes, *str_Lock, *threading_module;
static PyObject *str_acquire; /* interned at import, with the Sender's names */

static PyObject *
reply_route_prepare(ReplyRoute *self, PyObject *Py_UNUSED(arg))
{
    if (self->mux == NULL || self->waiter_cls == NULL) {
        PyErr_SetString(PyExc_TypeError, "ReplyRoute was not initialised");
        return NULL;
    }
    PyObject *token = NULL, *waiter = NULL, *lock = NULL, *prefix = NULL, *result = NULL;
    PyObject *tokens = PyObject_GetAttr(self->mux, str_tokens);
    if (tokens == NULL) {
        return NULL;
    }
    PyObject *n = PyIter_Next(tokens);
    Py_DECREF(tokens);
    if (n == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetNone(PyExc_StopIteration);
        }
        return NULL;
    }
    token = PyObject_Str(n);
    Py_DECREF(n);
    if (token == NULL) {
        return NULL;
    }
    PyObject *lock_cls = PyObject_GetAttr(threading_module, str_Lock); /* threading.Lock, as patched */
    if (lock_cls == NULL) {
        goto done;
    }
    lock = PyObject_CallNoArgs(lock_cls);
    Py_DECREF(lock_cls);
    if (lock == NULL) {
        goto done;
    }
    PyObject *r = PyObject_CallMethodNoArgs(lock, str_acquire);
    if (r == NULL) {
        goto done;
    }
    Py_DECREF(r);
    waiter = self->waiter_cls->tp_alloc(self->waiter_cls, 0);
    if (waiter == NULL) {
        goto done;
    }
    *(PyObject **)((char *)waiter + self->off_lock) = Py_NewRef(lock);
    *(PyObject **)((char *)waiter + self->off_value) = Py_NewRef(Py_None);
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL) {
        goto done;
    }
    *(PyObject **)((char *)waiter + self->off_end) = zero;
    prefix = PyObject_GetAttr(self->mux, str_prefix_bytes);
    if (prefix == NULL) {
        goto done;
    }
    if (!PyBytes_Check(prefix)) {
        PyErr_SetString(PyExc_TypeError, "prefix_bytes must be bytes");
        goto done;
    }
    Py_ssize_t tlen;
    const char *t = PyUnicode_AsUTF8AndSize(token, &tlen);
    if (t == NULL) {
        goto done;
    }
    PyObject *reply = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(prefix) + tlen);
    if (reply == NULL) {
        goto done;
    }
    memcpy(PyBytes_AS_STRING(reply), PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix));
    memcpy(PyBytes_AS_STRING(reply) + PyBytes_GET_SIZE(prefix), t, tlen);
    result = PyTuple_New(3);
    if (result == NULL) {
        Py_DECREF(reply);
        goto done;
    }
    PyTuple_SET_ITEM(result, 0, Py_NewRef(token));
    PyTuple_SET_ITEM(result, 1, Py_NewRef(waiter));
    PyTuple_SET_ITEM(result, 2, reply);
done:
    Py_XDECREF(prefix);
    Py_XDECREF(waiter);
    Py_XDECREF(lock);
    Py_DECREF(token);
    return result;
}

static PyMethodDef reply_route_methods[] = {
    {"prepare", (PyCFunction)reply_route_prepare, METH_NOARGS,
     "prepare() -> (token, waiter, reply): ResponseMux.prepare_one in one call"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReplyRouteType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "natsjs_sync.protocol._speedups.ReplyRoute",
    .tp_basicsize = sizeof(ReplyRoute),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(ReplyRoute, vectorcall),
    .tp_doc = "ReplyRoute(mux, waiter_cls): the response inbox's route, ResponseMux.route in one call.",
    .tp_new = reply_route_new,
    .tp_init = (initproc)reply_route_init,
    .tp_dealloc = (destructor)reply_route_dealloc,
    .tp_traverse = (traverseproc)reply_route_traverse,
    .tp_clear = (inquiry)reply_route_clear,
    .tp_call = PyVectorcall_Call,
    .tp_methods = reply_route_methods,
};

/*
 * Inlet: the reader-thread end of a subscription's queue (the Python twin,
 * and the reference, is natsjs_sync._core.inlet.InletPy). Calling it with a
 * message counts it and either puts it on the queue or, over the pending
 * limits, drops it; the first drop of an episode calls on_slow(dropped).
 * After `max` messages in all it calls on_max(). Once `closed` is set it
 * takes nothing. The consuming side adds to bytes_out what it hands over.
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *put;     /* put(item): enqueue */
    PyObject *qsize;   /* qsize() -> items queued */
    PyObject *on_slow; /* on_slow(dropped) or None */
    PyObject *on_max;  /* on_max() or None */
    PyObject *get;     /* get(block, timeout): the queue's, for take(); or None */
    PyObject *on_take; /* on_take(timeout, item): take()'s other cases; or None */
    Py_ssize_t msgs_limit, bytes_limit;
    Py_ssize_t received, bytes_in, bytes_out, dropped, max;
    int closed, slow, takeable;
} Inlet;

#define NO_LIMIT ((Py_ssize_t)1 << 62) /* _core/options.py's UNLIMITED */

/* len(msg.data), or -1 with an exception set. */
static Py_ssize_t
msg_size(PyObject *msg)
{
    if (msg_base != NULL && PyObject_TypeCheck(msg, msg_base) && Py_TYPE(msg)->tp_basicsize == msg_base->tp_basicsize) {
        return payload_size(msg);
    }
    PyObject *data = PyObject_GetAttrString(msg, "data");
    Py_ssize_t size = data == NULL ? -1 : PyObject_Length(data);
    Py_XDECREF(data);
    return size;
}

static int
inlet_traverse(Inlet *self, visitproc visit, void *arg)
{
    Py_VISIT(self->put);
    Py_VISIT(self->qsize);
    Py_VISIT(self->on_slow);
    Py_VISIT(self->on_max);
    Py_VISIT(self->get);
    Py_VISIT(self->on_take);
    return 0;
}

static int
inlet_clear(Inlet *self)
{
    Py_CLEAR(self->put);
    Py_CLEAR(self->qsize);
    Py_CLEAR(self->on_slow);
    Py_CLEAR(self->on_max);
    Py_CLEAR(self->get);
    Py_CLEAR(self->on_take);
    return 0;
}

static void
inlet_dealloc(Inlet *self)
{
    PyObject_GC_UnTrack(self);
    inlet_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
inlet_init(Inlet *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"put", "qsize", "msgs_limit", "bytes_limit", "on_slow", NULL};
    PyObject *put, *qsize, *on_slow = Py_None;
    Py_ssize_t msgs_limit, bytes_limit;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOnn|O", kwlist, &put, &qsize, &msgs_limit, &bytes_limit,
                                     &on_slow)) {
        return -1;
    }
    Py_INCREF(put);
    Py_XSETREF(self->put, put);
    Py_INCREF(qsize);
    Py_XSETREF(self->qsize, qsize);
    Py_INCREF(on_slow);
    Py_XSETREF(self->on_slow, on_slow);
    Py_INCREF(Py_None);
    Py_XSETREF(self->on_max, Py_None);
    Py_INCREF(Py_None);
    Py_XSETREF(self->get, Py_None);
    Py_INCREF(Py_None);
    Py_XSETREF(self->on_take, Py_None);
    self->takeable = 0;
    self->msgs_limit = msgs_limit;
    self->bytes_limit = bytes_limit;
    self->received = self->bytes_in = self->bytes_out = self->dropped = 0;
    self->max = -1;
    self->closed = self->slow = 0;
    return 0;
}

static PyObject *
inlet_call(Inlet *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "an inlet takes one message");
        return NULL;
    }
    if (self->closed) {
        Py_RETURN_NONE;
    }
    if (self->put == NULL || self->qsize == NULL) {
        PyErr_SetString(PyExc_TypeError, "the inlet was not initialised");
        return NULL;
    }
    PyObject *msg = args[0];
    Py_ssize_t size = msg_size(msg);
    if (size < 0) {
        return NULL;
    }
    self->received++;
    int over = self->bytes_in - self->bytes_out + size > self->bytes_limit;
    if (!over && self->msgs_limit < NO_LIMIT) {
        PyObject *n = PyObject_CallNoArgs(self->qsize);
        if (n == NULL) {
            return NULL;
        }
        Py_ssize_t queued = PyLong_AsSsize_t(n);
        Py_DECREF(n);
        if (queued == -1 && PyErr_Occurred()) {
            return NULL;
        }
        over = queued >= self->msgs_limit;
    }
    if (over) {
        self->dropped++;
        if (!self->slow) {
            self->slow = 1;
            PyObject *on_slow = self->on_slow;
            if (on_slow != NULL && on_slow != Py_None) {
                Py_INCREF(on_slow); /* held while it runs */
                PyObject *r = PyObject_CallFunction(on_slow, "n", self->dropped);
                Py_DECREF(on_slow);
                if (r == NULL) {
                    return NULL;
                }
                Py_DECREF(r);
            }
        }
    } else {
        self->slow = 0; /* the episode is over; the next one is reported again */
        self->bytes_in += size;
        PyObject *r = PyObject_CallOneArg(self->put, msg);
        if (r == NULL) {
            return NULL;
        }
        Py_DECREF(r);
    }
    PyObject *on_max = self->on_max;
    if (self->max >= 0 && self->received >= self->max && on_max != NULL && on_max != Py_None) {
        Py_INCREF(on_max); /* held while it runs: it may replace itself */
        PyObject *r = PyObject_CallNoArgs(on_max);
        Py_DECREF(on_max);
        if (r == NULL) {
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_RETURN_NONE;
}

static PyObject *
inlet_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    Inlet *self = (Inlet *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->vectorcall = (vectorcallfunc)inlet_call;
        self->max = -1;
    }
    return (PyObject *)self;
}

/*
 * take(timeout) -> the next message: the consuming side's common case in one
 * call (Subscription.next_msg). When the inlet is takeable and timeout is
 * None or a number of seconds in [0, inf), it waits on get(True, timeout)
 * (queue.Empty from it propagates: the caller words the TimeoutError) and,
 * for a message, adds its size to bytes_out and returns it. Anything else
 * goes to on_take(timeout, item): item is what get returned when it was not a
 * message (a control item), or None when nothing was taken (the rule for
 * every other case is Python's).
 */
/* threading.TIMEOUT_MAX, read once at import (see PyInit__speedups). */
static double take_wait_max = 0.0;

static PyObject *
inlet_take(Inlet *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "take(timeout)");
        return NULL;
    }
    PyObject *timeout = args[0];
    PyObject *get = self->get, *on_take = self->on_take;
    if (on_take == NULL || on_take == Py_None) {
        PyErr_SetString(PyExc_TypeError, "the inlet has no on_take");
        return NULL;
    }
    int fast = self->takeable && get != NULL && get != Py_None;
    if (fast && timeout != Py_None) {
        double t;
        if (PyFloat_CheckExact(timeout)) {
            t = PyFloat_AS_DOUBLE(timeout);
        } else if (PyLong_CheckExact(timeout)) {
            t = PyLong_AsDouble(timeout);
            if (t == -1.0 && PyErr_Occurred()) {
                PyErr_Clear(); /* too large: Python's rule words the error */
                fast = 0;
            }
        } else {
            t = -1.0; /* Deadline, USE_DEFAULT, bad values: Python's rule */
        }
        fast = fast && t >= 0.0 && t < take_wait_max;
    }
    Py_INCREF(on_take); /* held while it runs: it may be replaced meanwhile */
    PyObject *item = NULL, *res;
    if (fast) {
        Py_INCREF(get); /* held while it waits (without the GIL) */
        PyObject *argv[2] = {Py_True, timeout};
        item = PyObject_Vectorcall(get, argv, 2, NULL);
        Py_DECREF(get);
        if (item == NULL) {
            Py_DECREF(on_take);
            return NULL;
        }
        if (msg_base != NULL && PyObject_TypeCheck(item, msg_base)) {
            Py_DECREF(on_take);
            Py_ssize_t size = msg_size(item);
            if (size < 0) {
                Py_DECREF(item);
                return NULL;
            }
            self->bytes_out += size;
            return item;
        }
    }
    PyObject *argv[2] = {timeout, item == NULL ? Py_None : item};
    res = PyObject_Vectorcall(on_take, argv, 2, NULL);
    Py_XDECREF(item);
    Py_DECREF(on_take);
    return res;
}

static PyMethodDef inlet_methods[] = {
    {"take", (PyCFunction)(void (*)(void))inlet_take, METH_FASTCALL,
     "take(timeout) -> the next message (see the C source; the twin is InletPy.take)"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef inlet_members[] = {
    {"msgs_limit", T_PYSSIZET, offsetof(Inlet, msgs_limit), 0, "pending messages allowed"},
    {"bytes_limit", T_PYSSIZET, offsetof(Inlet, bytes_limit), 0, "pending payload bytes allowed"},
    {"received", T_PYSSIZET, offsetof(Inlet, received), 0, "messages received (dropped ones included)"},
    {"bytes_in", T_PYSSIZET, offsetof(Inlet, bytes_in), 0, "payload bytes queued in all"},
    {"bytes_out", T_PYSSIZET, offsetof(Inlet, bytes_out), 0, "payload bytes handed over in all"},
    {"dropped", T_PYSSIZET, offsetof(Inlet, dropped), 0, "messages dropped over the limits"},
    {"max", T_PYSSIZET, offsetof(Inlet, max), 0, "call on_max after this many messages (-1: never)"},
    {"closed", T_INT, offsetof(Inlet, closed), 0, "nonzero: take nothing more"},
    {"slow", T_INT, offsetof(Inlet, slow), 0, "nonzero: in a slow-consumer episode"},
    {"on_max", T_OBJECT, offsetof(Inlet, on_max), 0, "called once max messages were received"},
    {"get", T_OBJECT, offsetof(Inlet, get), 0, "get(block, timeout): the queue's, for take(); or None"},
    {"on_take", T_OBJECT, offsetof(Inlet, on_take), 0, "on_take(timeout, item): take()'s other cases"},
    {"takeable", T_INT, offsetof(Inlet, takeable), 0, "nonzero: take() may wait on get itself"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject InletType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "natsjs_sync.protocol._speedups.Inlet",
    .tp_basicsize = sizeof(Inlet),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Inlet, vectorcall),
    .tp_doc = "Inlet(put, qsize, msgs_limit, bytes_limit, on_slow=None): a subscription's reader-side end.",
    .tp_new = inlet_new,
    .tp_init = (initproc)inlet_init,
    .tp_dealloc = (destructor)inlet_dealloc,
    .tp_traverse = (traverseproc)inlet_traverse,
    .tp_clear = (inquiry)inlet_clear,
    .tp_call = PyVectorcall_Call,
    .tp_members = inlet_members,
    .tp_methods = inlet_methods,
};

/*
 * Outlet: a connection's publishing end (the Python twin, and the reference,
 * is natsjs_sync._core.outlet.OutletPy). Called with (subject, payload): when
 * open, payload is bytes, subject is a str already in the subjects cache
 * (validated) and the payload fits max_payload, it appends
 * "PUB <subject> <size>\r\n<payload>\r\n" to the buffer in one resize (with a
 * third argument, a header block the library encoded: "HPUB <subject> <header
 * size> <total size>\r\n<headers><payload>\r\n"), counts
 * it, calls on_full() past the threshold or on_wake() when no flush is
 * requested, and returns True. Otherwise it does nothing and returns False.
 * Under the GIL the append is one step (see _core/writer.py).
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *buffer;   /* bytearray */
    PyObject *subjects; /* dict: subject -> validated bytes */
    PyObject *on_wake;  /* on_wake(): ask the flusher to send */
    PyObject *on_full;  /* on_full(): send now (back-pressure) */
    Py_ssize_t threshold, max_payload, out_msgs, out_bytes;
    int open, flush_requested;
} Outlet;

static int
outlet_traverse(Outlet *self, visitproc visit, void *arg)
{
    Py_VISIT(self->buffer);
    Py_VISIT(self->subjects);
    Py_VISIT(self->on_wake);
    Py_VISIT(self->on_full);
    return 0;
}

static int
outlet_clear(Outlet *self)
{
    Py_CLEAR(self->buffer);
    Py_CLEAR(self->subjects);
    Py_CLEAR(self->on_wake);
    Py_CLEAR(self->on_full);
    return 0;
}

static void
outlet_dealloc(Outlet *self)
{
    PyObject_GC_UnTrack(self);
    outlet_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
outlet_init(Outlet *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"buffer", "subjects", "threshold", "on_wake", "on_full", NULL};
    PyObject *buffer, *subjects, *on_wake, *on_full;
    Py_ssize_t threshold;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!nOO", kwlist, &PyByteArray_Type, &buffer, &PyDict_Type,
                                     &subjects, &threshold, &on_wake, &on_full)) {
        return -1;
    }
    Py_INCREF(buffer);
    Py_XSETREF(self->buffer, buffer);
    Py_INCREF(subjects);
    Py_XSETREF(self->subjects, subjects);
    Py_INCREF(on_wake);
    Py_XSETREF(self->on_wake, on_wake);
    Py_INCREF(on_full);
    Py_XSETREF(self->on_full, on_full);
    self->threshold = threshold;
    self->max_payload = 1024 * 1024;
    self->out_msgs = self->out_bytes = 0;
    self->open = self->flush_requested = 0;
    return 0;
}

/* v in decimal into out (snprintf's locale and format parsing cost more than the rest); returns its length */
static int
outlet_digits(size_t v, char *out)
{
    char rev[24];
    int nd = 0;
    do {
        rev[nd++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (int i = 0; i < nd; i++) {
        out[i] = rev[nd - 1 - i];
    }
    return nd;
}

static PyObject *
outlet_call(Outlet *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if ((nargs != 2 && nargs != 3) || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "an outlet takes (subject, payload[, header block])");
        return NULL;
    }
    PyObject *subject = args[0], *payload = args[1], *buffer = self->buffer;
    PyObject *head = nargs == 3 && args[2] != Py_None ? args[2] : NULL;
    if (!self->open || !PyBytes_CheckExact(payload) || !PyUnicode_CheckExact(subject) || buffer == NULL ||
        !PyByteArray_CheckExact(buffer) || self->subjects == NULL || (head != NULL && !PyBytes_CheckExact(head))) {
        Py_RETURN_FALSE;
    }
    PyObject *subj = PyDict_GetItemWithError(self->subjects, subject); /* borrowed */
    if (subj == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_FALSE; /* not validated yet: the general path does that */
    }
    Py_ssize_t hl = head != NULL ? PyBytes_GET_SIZE(head) : 0;
    Py_ssize_t size = PyBytes_GET_SIZE(payload);
    if (!PyBytes_CheckExact(subj) || size > self->max_payload || hl > self->max_payload - size) {
        Py_RETURN_FALSE;
    }
    Py_ssize_t total = hl + size; /* what max_payload bounds: headers and payload */
    char digits[24], hdigits[24];
    int nd = outlet_digits((size_t)total, digits);
    int nh = head != NULL ? outlet_digits((size_t)hl, hdigits) : 0;
    Py_ssize_t ls = PyBytes_GET_SIZE(subj);
    Py_ssize_t old = PyByteArray_GET_SIZE(buffer);
    /* "PUB <subj> <size>\r\n" or "HPUB <subj> <hl> <total>\r\n", then headers, payload, "\r\n" */
    Py_ssize_t add = (head != NULL ? 5 + ls + 1 + nh + 1 : 4 + ls + 1) + nd + 2 + total + 2;
    if (ls > PY_SSIZE_T_MAX / 4 || total > PY_SSIZE_T_MAX / 4 || old > PY_SSIZE_T_MAX - add) {
        PyErr_NoMemory();
        return NULL;
    }
    if (PyByteArray_Resize(buffer, old + add) < 0) {
        return NULL;
    }
    char *at = PyByteArray_AS_STRING(buffer) + old;
    if (head != NULL) {
        memcpy(at, "HPUB ", 5);
        at += 5;
    } else {
        memcpy(at, "PUB ", 4);
        at += 4;
    }
    memcpy(at, PyBytes_AS_STRING(subj), (size_t)ls);
    at += ls;
    *at++ = ' ';
    if (head != NULL) {
        memcpy(at, hdigits, (size_t)nh);
        at += nh;
        *at++ = ' ';
    }
    memcpy(at, digits, (size_t)nd);
    at += nd;
    *at++ = '\r';
    *at++ = '\n';
    if (head != NULL) {
        memcpy(at, PyBytes_AS_STRING(head), (size_t)hl);
        at += hl;
    }
    memcpy(at, PyBytes_AS_STRING(payload), (size_t)size);
    at += size;
    at[0] = '\r';
    at[1] = '\n';
    self->out_msgs++;
    self->out_bytes += total;
    PyObject *then = NULL;
    if (old + add > self->threshold) {
        then = self->on_full;
    } else if (!self->flush_requested) {
        then = self->on_wake;
    }
    if (then != NULL && then != Py_None) {
        Py_INCREF(then); /* held while it runs */
        PyObject *r = PyObject_CallNoArgs(then);
        Py_DECREF(then);
        if (r == NULL) {
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_RETURN_TRUE;
}

static PyObject *
outlet_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    Outlet *self = (Outlet *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->vectorcall = (vectorcallfunc)outlet_call;
        self->max_payload = 1024 * 1024;
    }
    return (PyObject *)self;
}

static PyMemberDef outlet_members[] = {
    {"buffer", T_OBJECT, offsetof(Outlet, buffer), 0, "the writer's buffer (bytearray)"},
    {"subjects", T_OBJECT, offsetof(Outlet, subjects), READONLY, "subject -> validated bytes"},
    {"on_wake", T_OBJECT, offsetof(Outlet, on_wake), 0, "asks the flusher to send"},
    {"on_full", T_OBJECT, offsetof(Outlet, on_full), 0, "sends the buffer now"},
    {"threshold", T_PYSSIZET, offsetof(Outlet, threshold), 0, "buffered bytes past which on_full runs"},
    {"max_payload", T_PYSSIZET, offsetof(Outlet, max_payload), 0, "the server's max_payload"},
    {"out_msgs", T_PYSSIZET, offsetof(Outlet, out_msgs), 0, "messages published"},
    {"out_bytes", T_PYSSIZET, offsetof(Outlet, out_bytes), 0, "payload bytes published"},
    {"open", T_INT, offsetof(Outlet, open), 0, "nonzero: publishes may append without the lock"},
    {"flush_requested", T_INT, offsetof(Outlet, flush_requested), 0, "nonzero: the flusher was asked to send"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject OutletType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "natsjs_sync.protocol._speedups.Outlet",
    .tp_basicsize = sizeof(Outlet),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Outlet, vectorcall),
    .tp_doc = "Outlet(buffer, subjects, threshold, on_wake, on_full): a connection's publishing end.",
    .tp_new = outlet_new,
    .tp_init = (initproc)outlet_init,
    .tp_dealloc = (destructor)outlet_dealloc,
    .tp_traverse = (traverseproc)outlet_traverse,
    .tp_clear = (inquiry)outlet_clear,
    .tp_call = PyVectorcall_Call,
    .tp_members = outlet_members,
};


/* ---------------------------------------------------------------- the read role
 *
 * A connection's read role (natsjs_sync._core.reader): whoever holds it reads
 * the socket and feeds the one parser. The reader thread takes the role when
 * it is free and waits on the socket holding it (wait_read). A caller waiting
 * for its reply takes the role only when it is free (acquire(False)); finding
 * it with the reader, it asks for it (``wanted``), and the reader, once its
 * read is routed, lets go and stays out for a moment (LINGER). A caller that
 * lets go with ``linger`` keeps the reader out for that moment too, so a
 * thread's next request finds the role free and the reader thread is not
 * woken for every reply; without ``linger`` (others wait for replies) the
 * reader takes over at once. While the role is free and the reader stays out,
 * nobody reads: bytes wait at most LINGER. The reader also looks again every
 * LINGER while a caller holds the role.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LINGER_NS 2000000LL /* 2 ms */
#define HANDOVER_NS 2000000LL /* the longest take() waits for the reader to hand the role over */

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int held;
    int wanted;                /* a caller found the role with the reader */
    int reader_holds;
    long long linger_until;    /* monotonic ns: the reader stays out until then */
    unsigned long owner;       /* thread ident of the holder, 0 when free */
    Py_ssize_t reads;          /* socket reads caller_read handed out (bytes or end of stream) */
    int wake_fd;               /* eventfd that wakes the reader's wait on the socket (-1: none) */
    int polling;               /* the reader holds the role in its wait on the socket */
    int taking;                /* callers in take(), waiting for the reader to hand the role over */
} RoleObject;

static long long
mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void
timed_wait(RoleObject *self, long long until)
{
    struct timespec ts = {(time_t)(until / 1000000000LL), (long)(until % 1000000000LL)};
    pthread_cond_timedwait(&self->cv, &self->mu, &ts);
}

static PyObject *
role_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    RoleObject *self = (RoleObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&self->mu, NULL) != 0 || pthread_cond_init(&self->cv, &attr) != 0) {
        pthread_condattr_destroy(&attr);
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    pthread_condattr_destroy(&attr);
    self->held = self->wanted = self->reader_holds = 0;
    self->linger_until = 0;
    self->owner = 0;
    self->reads = 0;
    self->polling = self->taking = 0;
    /* Without it (no eventfd) take() finds the reader's role taken, as acquire(False) does. */
    self->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return (PyObject *)self;
}

static void
role_dealloc(RoleObject *self)
{
    /* A forked child may drop a role a parent thread held: its primitives are
     * only forgotten then, never used (the child's copy of the eventfd is closed). */
    if (self->wake_fd >= 0) {
        close(self->wake_fd);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The end of acquire() and take(): a caller that got the role holds it, with its thread as owner. */
static PyObject *
role_taken(RoleObject *self, int got, unsigned long me)
{
    if (got) {
        pthread_mutex_lock(&self->mu);
        self->held = 1;
        self->reader_holds = 0;
        self->owner = me;
        pthread_mutex_unlock(&self->mu);
    }
    return PyBool_FromLong(got);
}

static PyObject *
role_acquire(RoleObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int blocking = 1, got = 0;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "acquire(blocking=True)");
        return NULL;
    }
    if (nargs == 1 && (blocking = PyObject_IsTrue(args[0])) < 0) {
        return NULL;
    }
    unsigned long me = PyThread_get_thread_ident();
    pthread_mutex_lock(&self->mu);
    if (!self->held) {
        got = 1;
        /* Taken in this section: wait_read (GIL-free) may run before the next one. */
        self->held = 1;
    }
    else if (!blocking) {
        if (self->reader_holds) {
            self->wanted = 1;
        }
    }
    pthread_mutex_unlock(&self->mu);
    if (!got && blocking) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&self->mu);
        while (self->held) {
            timed_wait(self, mono_ns() + LINGER_NS); /* a lingering release does not signal */
        }
        got = 1;
        self->held = 1; /* taken inside the GIL-free section: marked below too */
        pthread_mutex_unlock(&self->mu);
        Py_END_ALLOW_THREADS
    }
    return role_taken(self, got, me);
}

/* take() -> bool: acquire(False), except that a reader thread waiting on the quiet socket
 * with the role is woken to hand it over (a request made after a quiet moment then reads its
 * own reply, as one made right after another does). The wait for the hand-over is bounded: a
 * reader that does not get the CPU in time keeps the role and reads for this caller. */
static PyObject *
role_take(RoleObject *self, PyObject *Py_UNUSED(arg))
{
    unsigned long me = PyThread_get_thread_ident();
    int got = 0, ask = 0;
    pthread_mutex_lock(&self->mu);
    if (!self->held) {
        got = 1;
        self->held = 1; /* taken in this section, as in acquire() */
    }
    else if (self->reader_holds) {
        self->wanted = 1;
        if (self->polling && self->wake_fd >= 0) {
            ask = 1;
            self->taking++;
        }
    }
    pthread_mutex_unlock(&self->mu);
    if (ask) {
        Py_BEGIN_ALLOW_THREADS
        uint64_t one = 1;
        ssize_t w = write(self->wake_fd, &one, sizeof one);
        (void)w; /* a full counter (never, in practice) wakes the reader too */
        pthread_mutex_lock(&self->mu);
        long long until = mono_ns() + HANDOVER_NS;
        /* Only while the reader has it: once another caller holds the role (handed over to
         * it, or taken as the reader let go), this one waits for its reply as usual (the
         * holder reads it) instead of the rest of the 2 ms. */
        while (self->held && self->reader_holds && mono_ns() < until) {
            timed_wait(self, until);
        }
        if (!self->held) {
            got = 1;
            self->held = 1;
        }
        self->taking--;
        pthread_mutex_unlock(&self->mu);
        Py_END_ALLOW_THREADS
    }
    return role_taken(self, got, me);
}

static PyObject *
role_release(RoleObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int linger = 0;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "release(linger=False)");
        return NULL;
    }
    if (nargs == 1 && (linger = PyObject_IsTrue(args[0])) < 0) {
        return NULL;
    }
    pthread_mutex_lock(&self->mu);
    if (!self->held) {
        pthread_mutex_unlock(&self->mu);
        PyErr_SetString(PyExc_RuntimeError, "release of a read role not held");
        return NULL;
    }
    self->held = 0;
    self->reader_holds = 0;
    self->owner = 0;
    if (linger) {
        self->linger_until = mono_ns() + LINGER_NS;
    }
    else {
        self->linger_until = 0;
        pthread_cond_broadcast(&self->cv);
    }
    pthread_mutex_unlock(&self->mu);
    Py_RETURN_NONE;
}

/* release_mine(linger=False) -> bool: let go if the calling thread holds the role.
 * One call, so that nothing a signal handler raises can come between the check
 * and the release (as it can between two calls: mine(), then release()). */
static PyObject *
role_release_mine(RoleObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (self->owner == 0 || self->owner != PyThread_get_thread_ident()) {
        Py_RETURN_FALSE;
    }
    PyObject *r = role_release(self, args, nargs);
    if (r == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    Py_RETURN_TRUE;
}

static PyObject *
role_mine(RoleObject *self, PyObject *Py_UNUSED(arg))
{
    return PyBool_FromLong(self->owner != 0 && self->owner == PyThread_get_thread_ident());
}

static PyObject *
role_held(RoleObject *self, PyObject *Py_UNUSED(arg))
{
    return PyBool_FromLong(self->held);
}

static int
parse_fd_size(PyObject *const *args, int *fd, Py_ssize_t *size)
{
    *fd = PyLong_AsLong(args[0]);
    if (*fd == -1 && PyErr_Occurred()) {
        return -1;
    }
    *size = PyLong_AsSsize_t(args[1]);
    if (*size == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (*fd < 0 || *size <= 0) {
        PyErr_SetString(PyExc_ValueError, "bad descriptor or size");
        return -1;
    }
    return 0;
}

static PyObject *
role_wait_read(RoleObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int fd;
    Py_ssize_t size;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "wait_read(fd, size, may_linger)");
        return NULL;
    }
    if (parse_fd_size(args, &fd, &size) < 0) {
        return NULL;
    }
    int may_linger = PyObject_IsTrue(args[2]);
    if (may_linger < 0) {
        return NULL;
    }
    PyObject *buf = PyBytes_FromStringAndSize(NULL, size);
    if (buf == NULL) {
        return NULL;
    }
    char *p = PyBytes_AS_STRING(buf);
    ssize_t n = -1;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    if (self->wanted && may_linger) {
        /* A caller asked while this thread read: it has the next turn once no
         * other request waits for a reply that only a reader would read
         * meanwhile. Kept until then: the read that routed a request to a
         * responder in this process is not the one that brings the reply. */
        self->wanted = 0;
        self->linger_until = mono_ns() + LINGER_NS;
    }
    for (;;) {
        /* Wait for the role, take it, read: back here when a caller took it over. */
        for (;;) {
            long long now = mono_ns();
            if (self->held) {
                timed_wait(self, now + LINGER_NS);
                continue;
            }
            if (self->linger_until > now) {
                timed_wait(self, self->linger_until);
                continue;
            }
            break;
        }
        self->held = 1;
        self->reader_holds = 1;
        self->owner = 0; /* set with the GIL below */
        pthread_mutex_unlock(&self->mu);
        int handed = 0;
        for (int first = 1;; first = 0) {
            /* Bytes already there (a busy connection) are read without a wait first. */
            if (!first) {
                struct pollfd pfd[2] = {{fd, POLLIN, 0}, {self->wake_fd, POLLIN, 0}};
                nfds_t nfds = self->wake_fd >= 0 ? 2 : 1;
                pthread_mutex_lock(&self->mu);
                self->polling = 1;
                pthread_mutex_unlock(&self->mu);
                int ready = poll(pfd, nfds, -1);
                int poll_err = errno;
                pthread_mutex_lock(&self->mu);
                self->polling = 0;
                if (ready > 0 && nfds == 2 && (pfd[1].revents & POLLIN)) {
                    uint64_t count;
                    ssize_t r = read(self->wake_fd, &count, sizeof count);
                    (void)r; /* drained; EAGAIN: another wake drained it first */
                    if (self->taking > 0) {
                        /* A caller waits in take(): the role is its until it lets go, and the
                         * bytes there now (maybe its reply) are for it to read. */
                        handed = 1;
                        self->held = 0;
                        self->reader_holds = 0;
                        self->wanted = 0;
                        self->linger_until = mono_ns() + LINGER_NS;
                        pthread_cond_broadcast(&self->cv);
                    }
                }
                if (handed) {
                    break; /* the mutex stays locked: the outer loop waits for the role */
                }
                pthread_mutex_unlock(&self->mu);
                if (ready < 0) {
                    if (poll_err == EINTR) {
                        continue;
                    }
                    err = poll_err;
                    break;
                }
                if (!(pfd[0].revents)) {
                    continue; /* only the wake, and nobody waits for the role any more */
                }
            }
            n = recv(fd, p, (size_t)size, MSG_DONTWAIT);
            if (n >= 0) {
                break;
            }
            err = errno;
            if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
                break;
            }
            err = 0;
        }
        if (!handed) {
            break;
        }
    }
    if (n < 0) {
        pthread_mutex_lock(&self->mu);
        self->held = 0;
        self->reader_holds = 0;
        pthread_cond_broadcast(&self->cv);
        pthread_mutex_unlock(&self->mu);
    }
    Py_END_ALLOW_THREADS
    if (n < 0) {
        Py_DECREF(buf);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    self->owner = PyThread_get_thread_ident();
    if (n != size && _PyBytes_Resize(&buf, n) < 0) {
        return NULL; /* the role stays held: the caller's failure path lets go of it */
    }
    return buf;
}

static PyObject *
role_caller_read(RoleObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int fd;
    Py_ssize_t size;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "caller_read(fd, size, timeout_ms)");
        return NULL;
    }
    if (parse_fd_size(args, &fd, &size) < 0) {
        return NULL;
    }
    int timeout_ms = PyLong_AsLong(args[2]);
    if (timeout_ms == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (self->owner != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "caller_read without the read role");
        return NULL;
    }
    PyObject *buf = PyBytes_FromStringAndSize(NULL, size);
    if (buf == NULL) {
        return NULL;
    }
    char *p = PyBytes_AS_STRING(buf);
    ssize_t n = -1;
    int err = 0, ready;
    Py_BEGIN_ALLOW_THREADS
    struct pollfd pfd = {fd, POLLIN, 0};
    ready = poll(&pfd, 1, timeout_ms);
    if (ready < 0) {
        err = errno;
    }
    Py_END_ALLOW_THREADS
    if (ready > 0) {
        /* Handlers of signals that came during the wait run before the bytes are taken: one
         * that another thread caught does not cut the wait short, and its exception, raised
         * as this call returned, would leave the bytes read and unrouted (the connection lost
         * with them). Raised here, it leaves them in the socket for the next holder. */
        if (PyErr_CheckSignals() < 0) {
            Py_DECREF(buf);
            return NULL;
        }
        /* With the GIL: the bytes are there, the copy is short. */
        n = recv(fd, p, (size_t)size, MSG_DONTWAIT);
        if (n < 0) {
            err = errno;
        }
    }
    if (n >= 0) {
        /* Counted before Python sees the bytes: an exception a signal handler raises as
         * this call returns leaves them unrouted, and the count tells the caller so. */
        self->reads++;
        if (n != size && _PyBytes_Resize(&buf, n) < 0) {
            return NULL;
        }
        return buf;
    }
    Py_DECREF(buf);
    if (ready == 0 || err == EAGAIN || err == EWOULDBLOCK || err == EINTR) {
        Py_RETURN_NONE; /* nothing yet (a signal's handler runs once Python code runs again) */
    }
    errno = err;
    return PyErr_SetFromErrno(PyExc_OSError);
}

/* One send that never waits: the bytes the socket takes now (0 when it takes none).
 * A write path tries it first so that a write the socket takes whole (nearly all) costs one
 * system call: a socket with a timeout polls before every send, and changing the timeout for a
 * deadline is a further call each way. MSG_NOSIGNAL: a closed peer is an error, never SIGPIPE,
 * whatever handler the embedding program set.
 *
 * With owner and record: when the socket takes all of data, owner.written = record, in this
 * call. A signal that came during the send has its handler run as the call returns, and an
 * exception it raises would leave the count unread: the record says the write was done. */
static PyObject *str_written; /* interned at import */

static PyObject *
send_nowait(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "send_nowait(fd, data[, owner, record])");
        return NULL;
    }
    int fd = PyLong_AsLong(args[0]);
    if (fd == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (fd < 0) {
        errno = EBADF;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    ssize_t n;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    do {
        n = send(fd, view.buf, (size_t)view.len, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        err = errno;
    }
    Py_END_ALLOW_THREADS
    Py_ssize_t whole = view.len;
    PyBuffer_Release(&view);
    if (n >= 0) {
        if (nargs == 4 && n == whole && PyObject_SetAttr(args[2], str_written, args[3]) < 0) {
            return NULL;
        }
        return PyLong_FromSsize_t(n);
    }
    if (err == EAGAIN || err == EWOULDBLOCK) {
        return PyLong_FromLong(0);
    }
    errno = err;
    return PyErr_SetFromErrno(PyExc_OSError);
}

static PyMethodDef role_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))role_acquire, METH_FASTCALL,
     "acquire(blocking=True) -> bool: take the role (waiting for it only when blocking); a caller "
     "that finds it with the reader thread asks for the next turn"},
    {"take", (PyCFunction)role_take, METH_NOARGS,
     "take() -> bool: acquire(False), but a reader thread waiting on the quiet socket is woken to "
     "hand the role over (waited for 2 ms at most)"},
    {"release", (PyCFunction)(void (*)(void))role_release, METH_FASTCALL,
     "release(linger=False): let go; with linger the reader thread stays out a moment"},
    {"release_mine", (PyCFunction)(void (*)(void))role_release_mine, METH_FASTCALL,
     "release_mine(linger=False) -> bool: release() if the calling thread holds the role"},
    {"mine", (PyCFunction)role_mine, METH_NOARGS, "whether the calling thread holds the role"},
    {"held", (PyCFunction)role_held, METH_NOARGS, "whether any thread holds the role"},
    {"wait_read", (PyCFunction)(void (*)(void))role_wait_read, METH_FASTCALL,
     "wait_read(fd, size, may_linger) -> bytes: the reader thread takes the role (first staying out a "
     "moment for a caller that asked for it, if may_linger), waits for fd and reads; returns "
     "holding the role (b'' at the end of the stream); raises OSError without it"},
    {"caller_read", (PyCFunction)(void (*)(void))role_caller_read, METH_FASTCALL,
     "caller_read(fd, size, timeout_ms) -> bytes or None: the holder waits up to timeout_ms and reads"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef role_members[] = {
    {"reads", T_PYSSIZET, offsetof(RoleObject, reads), READONLY,
     "socket reads caller_read handed out (bytes or the end of the stream)"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject RoleType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "natsjs_sync.protocol._speedups.ReadRole",
    .tp_basicsize = sizeof(RoleObject),
    .tp_dealloc = (destructor)role_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The read role of one connection: a lock whose holder reads the socket.",
    .tp_methods = role_methods,
    .tp_members = role_members,
    .tp_new = role_new,
};

/* ---------------------------------------------------------------- the send lock
 *
 * A connection's send lock (natsjs_sync._core.writer): a lock that knows its
 * holder. acquire() records the calling thread in the same call that takes the
 * lock, and release() lets go only for that thread. A signal handler's
 * exception (Ctrl-C, a SIGALRM timeout) is raised at the first bytecode after a
 * call returns: with a plain lock it can come between the acquire and the try
 * whose handler would let go, and nobody knows any more that the lock is held;
 * and a handler that lets go "if the lock is locked" may let go of another
 * thread's. Here a handler just calls release() (one call, raising
 * RuntimeError if this thread does not hold the lock).
 *
 * Not reentrant: its holder's acquire() returns False at once (a signal handler
 * that publishes on the thread it interrupted mid-write must not write into the
 * middle of that write, nor wait for itself).
 */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    unsigned long owner; /* thread ident of the holder, 0 when free */
} SendLockObject;

static PyObject *
sendlock_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    SendLockObject *self = (SendLockObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->lock = PyThread_allocate_lock();
    self->owner = 0;
    if (self->lock == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void
sendlock_dealloc(SendLockObject *self)
{
    if (self->lock != NULL) {
        if (self->owner != 0) {
            PyThread_release_lock(self->lock); /* as a threading.Lock dropped while held */
        }
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* acquire(blocking=True, timeout=-1) -> bool: threading.Lock's arguments and answer. */
static PyObject *
sendlock_acquire(SendLockObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *blocking_arg = nargs > 0 ? args[0] : NULL;
    PyObject *timeout_arg = nargs > 1 ? args[1] : NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "acquire(blocking=True, timeout=-1)");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (blocking_arg == NULL && PyUnicode_CompareWithASCIIString(name, "blocking") == 0) {
            blocking_arg = args[nargs + i];
        }
        else if (timeout_arg == NULL && PyUnicode_CompareWithASCIIString(name, "timeout") == 0) {
            timeout_arg = args[nargs + i];
        }
        else {
            PyErr_Format(PyExc_TypeError, "acquire() got an unexpected keyword argument '%U'", name);
            return NULL;
        }
    }
    int blocking = 1;
    if (blocking_arg != NULL && (blocking = PyObject_IsTrue(blocking_arg)) < 0) {
        return NULL;
    }
    double timeout = -1.0;
    if (timeout_arg != NULL && (timeout = PyFloat_AsDouble(timeout_arg)) == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    if (!blocking && timeout != -1.0) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (timeout != timeout || (timeout < 0 && timeout != -1.0)) {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    if (timeout > take_wait_max) {
        PyErr_SetString(PyExc_OverflowError, "timeout value is too large");
        return NULL;
    }
    unsigned long me = PyThread_get_thread_ident();
    if (self->owner == me) {
        Py_RETURN_FALSE; /* never reentered, never waited for by its own holder */
    }
    PyLockStatus got = PyThread_acquire_lock_timed(self->lock, 0, 0);
    if (got != PY_LOCK_ACQUIRED && blocking && timeout != 0.0) {
        /* Past a year (and up to TIMEOUT_MAX) it waits as if for ever: no deadline to overflow. */
        PY_TIMEOUT_T us = timeout < 0 || timeout > 31536000.0 ? -1 : (PY_TIMEOUT_T)(timeout * 1e6);
        long long until = us < 0 ? 0 : mono_ns() + (long long)us * 1000;
        for (;;) {
            Py_BEGIN_ALLOW_THREADS
            got = PyThread_acquire_lock_timed(self->lock, us, 1);
            Py_END_ALLOW_THREADS
            if (got != PY_LOCK_INTR) {
                break;
            }
            /* A signal: its Python handler runs now, and an exception it raises ends
             * the wait without the lock (as threading.Lock's acquire does). */
            if (Py_MakePendingCalls() < 0) {
                return NULL;
            }
            if (us > 0) {
                long long left = until - mono_ns();
                if (left <= 0) {
                    got = PyThread_acquire_lock_timed(self->lock, 0, 0);
                    break;
                }
                us = (PY_TIMEOUT_T)(left / 1000);
            }
        }
    }
    if (got != PY_LOCK_ACQUIRED) {
        Py_RETURN_FALSE;
    }
    self->owner = me; /* with the GIL, before any bytecode of this thread runs again */
    Py_RETURN_TRUE;
}

static PyObject *
sendlock_release(SendLockObject *self, PyObject *Py_UNUSED(arg))
{
    if (self->owner == 0 || self->owner != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "release of a send lock this thread does not hold");
        return NULL;
    }
    self->owner = 0;
    PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyObject *
sendlock_locked(SendLockObject *self, PyObject *Py_UNUSED(arg))
{
    if (self->owner != 0) {
        Py_RETURN_TRUE;
    }
    /* Free, or just taken by a thread still getting the GIL back to record itself. */
    if (PyThread_acquire_lock_timed(self->lock, 0, 0) != PY_LOCK_ACQUIRED) {
        Py_RETURN_TRUE;
    }
    PyThread_release_lock(self->lock);
    Py_RETURN_FALSE;
}

static PyObject *
sendlock_mine(SendLockObject *self, PyObject *Py_UNUSED(arg))
{
    return PyBool_FromLong(self->owner != 0 && self->owner == PyThread_get_thread_ident());
}

static PyMethodDef sendlock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))sendlock_acquire, METH_FASTCALL | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool: take the lock (False at once for its holder)"},
    {"release", (PyCFunction)sendlock_release, METH_NOARGS,
     "release(): let go; RuntimeError unless the calling thread holds the lock"},
    {"locked", (PyCFunction)sendlock_locked, METH_NOARGS, "whether any thread holds the lock"},
    {"mine", (PyCFunction)sendlock_mine, METH_NOARGS, "whether the calling thread holds the lock"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SendLockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "natsjs_sync.protocol._speedups.SendLock",
    .tp_basicsize = sizeof(SendLockObject),
    .tp_dealloc = (destructor)sendlock_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The send lock of one connection: a lock that knows its holder and lets only it release.",
    .tp_methods = sendlock_methods,
    .tp_new = sendlock_new,
};

/* ---------------------------------------------------------------- the sender
 *
 * Sender(writer, conn, lock, send_lock, buffer, outlet): a caller's write that
 * skips the buffer when the writer is idle (natsjs_sync._core.writer,
 * Writer.send_direct, is the Python side and says when it is used). Called with
 * (frame, size, waiter): under the connection's lock (taken without waiting),
 * when the connection is up, nothing is buffered, nothing was put in front or
 * withdrawn, no write is behind or cut, the transport has a plain socket to
 * send on directly (its ``direct``), no backlog, and its ``_closing`` lock and
 * the send lock are free, it takes the frame as the next bytes of the stream
 * (``writer.taken``, ``waiter.end``, the outlet's counters), lets go of the
 * connection's lock and sends the frame in one non-blocking system call.
 * Returns:
 *
 *   0  not idle: nothing was done (the general path buffers and sends);
 *   1  sent whole, the send lock let go of under the connection's lock;
 *   2  sent whole (``writer.sent_to`` says so), the send lock still held:
 *      others buffered bytes meanwhile, or the lock was busy (the caller
 *      goes on as the send lock's holder, for their bytes);
 *   3  the socket took part of it or failed: the rest is the transport's
 *      backlog and the writer is behind on that transport; the send lock is
 *      still held (the caller's next write sends the backlog first and
 *      reports a failure, as a write of the general path would).
 *
 * No Python code runs in it (locks, sockets, attributes: all C), so no signal
 * handler's exception can come between its steps: it is done, or not begun,
 * when one is raised as it returns. Nothing in it waits.
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *writer, *conn, *lock, *send_lock, *buffer, *outlet;
} Sender;

static PyObject *str_front, *str_holes, *str_behind, *str_broken, *str_taken, *str_sent_to, *str_transport,
    *str_direct, *str_closing, *str_backlog, *str_end, *str_acquire, *str_release, *str_fileno;

static int
sender_traverse(Sender *self, visitproc visit, void *arg)
{
    Py_VISIT(self->writer);
    Py_VISIT(self->conn);
    Py_VISIT(self->lock);
    Py_VISIT(self->send_lock);
    Py_VISIT(self->buffer);
    Py_VISIT(self->outlet);
    return 0;
}

static int
sender_clear(Sender *self)
{
    Py_CLEAR(self->writer);
    Py_CLEAR(self->conn);
    Py_CLEAR(self->lock);
    Py_CLEAR(self->send_lock);
    Py_CLEAR(self->buffer);
    Py_CLEAR(self->outlet);
    return 0;
}

static void
sender_dealloc(Sender *self)
{
    PyObject_GC_UnTrack(self);
    sender_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
sender_init(Sender *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"writer", "conn", "lock", "send_lock", "buffer", "outlet", NULL};
    PyObject *writer, *conn, *lock, *send_lock, *buffer, *outlet;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!O!O!", kwlist, &writer, &conn, &lock, &SendLockType,
                                     &send_lock, &PyByteArray_Type, &buffer, &OutletType, &outlet)) {
        return -1;
    }
    PyObject *refs[] = {writer, conn, lock, send_lock, buffer, outlet};
    PyObject **slots[] = {&self->writer, &self->conn, &self->lock, &self->send_lock, &self->buffer, &self->outlet};
    for (int i = 0; i < 6; i++) {
        Py_INCREF(refs[i]);
        Py_XSETREF(*slots[i], refs[i]);
    }
    return 0;
}

/* lock.acquire(False) for a threading lock: 1 taken, 0 not, -1 error */
static int
lock_try(PyObject *lock)
{
    PyObject *r = PyObject_CallMethodOneArg(lock, str_acquire, Py_False);
    if (r == NULL) {
        return -1;
    }
    int got = PyObject_IsTrue(r);
    Py_DECREF(r);
    return got;
}

/* lock.release() for a threading lock: 0, or -1 error */
static int
lock_release(PyObject *lock)
{
    PyObject *r = PyObject_CallMethodNoArgs(lock, str_release);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* obj.<name> is 0 (an int) or an empty list: 1; otherwise 0; -1 error */
static int
attr_is_empty(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        return -1;
    }
    int truth = PyObject_IsTrue(v); /* an int or a list: C, no Python code */
    Py_DECREF(v);
    return truth < 0 ? -1 : !truth;
}

/* whether obj.<name> is target: 1, 0, -1 error */
static int
attr_is(PyObject *obj, PyObject *name, PyObject *target)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        return -1;
    }
    int is = v == target;
    Py_DECREF(v);
    return is;
}

/* The connection's lock held: the transport to send on when the writer is idle (1, with the
 * transport's ``_closing`` lock taken and the descriptor in *fd), 0 when it is not, -1 error.
 * *transport and *closing are new references (NULL when not found). */
static int
sender_idle(Sender *self, PyObject **transport, PyObject **closing, long *fd)
{
    int ok;
    if (!((Outlet *)self->outlet)->open || PyByteArray_GET_SIZE(self->buffer) != 0) {
        return 0;
    }
    if ((ok = attr_is_empty(self->writer, str_front)) <= 0 || (ok = attr_is_empty(self->writer, str_holes)) <= 0) {
        return ok;
    }
    if ((*transport = PyObject_GetAttr(self->conn, str_transport)) == NULL) {
        return -1;
    }
    if (*transport == Py_None) {
        return 0;
    }
    if ((ok = attr_is(self->writer, str_behind, *transport)) != 0 ||
        (ok = attr_is(self->writer, str_broken, *transport)) != 0) {
        return ok < 0 ? -1 : 0;
    }
    /* Not through a __getattr__: a wrapper that hands out what it wraps (a meter's) has a
     * write of its own, and the backlog set by the caller would be the wrapper's, never sent. */
    PyObject *direct = PyObject_GenericGetAttr(*transport, str_direct);
    if (direct == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear(); /* a transport of another kind (a custom factory's): the general path */
        return 0;
    }
    PyObject *backlog = direct == Py_None ? NULL : PyObject_GetAttr(*transport, str_backlog);
    ok = backlog != NULL && PyBytes_CheckExact(backlog) && PyBytes_GET_SIZE(backlog) == 0;
    Py_XDECREF(backlog);
    if (!ok) {
        Py_DECREF(direct);
        return direct == Py_None || backlog != NULL ? 0 : -1;
    }
    /* _closing: the descriptor's number stays this socket's until the send is done (see TcpTransport) */
    if ((*closing = PyObject_GetAttr(*transport, str_closing)) == NULL || (ok = lock_try(*closing)) <= 0) {
        Py_DECREF(direct);
        if (*closing != NULL && ok == 0) {
            return 0;
        }
        return -1;
    }
    PyObject *fdobj = PyObject_CallMethodNoArgs(direct, str_fileno);
    Py_DECREF(direct);
    *fd = fdobj == NULL ? -1 : PyLong_AsLong(fdobj);
    Py_XDECREF(fdobj);
    if ((fdobj == NULL || (*fd == -1 && PyErr_Occurred())) || *fd < 0) {
        int err = PyErr_Occurred() != NULL;
        if (lock_release(*closing) < 0) {
            return -1;
        }
        return err ? -1 : 0; /* closed under us: the general path */
    }
    return 1;
}

static PyObject *
sender_call(Sender *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 3 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "a sender takes (frame, size, waiter)");
        return NULL;
    }
    PyObject *frame = args[0], *waiter = args[2];
    Py_ssize_t size = PyLong_AsSsize_t(args[1]);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Outlet *outlet = (Outlet *)self->outlet;
    SendLockObject *send_lock = (SendLockObject *)self->send_lock;
    unsigned long me = PyThread_get_thread_ident();
    if (self->writer == NULL || !outlet->open || !PyBytes_CheckExact(frame) || send_lock->owner == me) {
        return PyLong_FromLong(0); /* the send lock's holder: a signal handler's write, see SendLock */
    }
    int got = lock_try(self->lock);
    if (got <= 0) {
        return got < 0 ? NULL : PyLong_FromLong(0);
    }
    /* The connection's lock held. */
    PyObject *transport = NULL, *closing = NULL, *endobj = NULL;
    long status = 0, fd = -1;
    int fail = 0, closing_held = 0;
    int idle = sender_idle(self, &transport, &closing, &fd);
    if (idle <= 0) {
        fail = idle < 0;
        goto unlock;
    }
    closing_held = 1;
    PyObject *takenobj = PyObject_GetAttr(self->writer, str_taken);
    Py_ssize_t taken = takenobj == NULL ? -1 : PyLong_AsSsize_t(takenobj);
    Py_XDECREF(takenobj);
    Py_ssize_t len = PyBytes_GET_SIZE(frame);
    if ((taken == -1 && PyErr_Occurred()) || (endobj = PyLong_FromSsize_t(taken + len)) == NULL) {
        fail = 1;
        goto unlock;
    }
    if (PyThread_acquire_lock_timed(send_lock->lock, 0, 0) != PY_LOCK_ACQUIRED) {
        goto unlock; /* another thread is sending */
    }
    send_lock->owner = me;
    /* The take: the frame is the stream's next bytes, as if buffered and taken at once. */
    if (PyObject_SetAttr(self->writer, str_taken, endobj) < 0 ||
        (waiter != Py_None && PyObject_SetAttr(waiter, str_end, endobj) < 0)) {
        fail = 1; /* the send lock stays held: the caller's handler lets go (see Writer.send_direct) */
        goto unlock;
    }
    outlet->out_msgs++;
    outlet->out_bytes += size;
    if (lock_release(self->lock) < 0) {
        fail = 1;
        goto release_closing;
    }
    /* A failure (n < 0) is not raised here: the frame is kept as the backlog (below), whose
     * write by the caller meets the failure again and reports it as the general path does. */
    ssize_t n;
    Py_BEGIN_ALLOW_THREADS
    do {
        n = send((int)fd, PyBytes_AS_STRING(frame), (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    Py_END_ALLOW_THREADS
    closing_held = 0;
    if (lock_release(closing) < 0) {
        fail = 1;
    }
    if (n == len) {
        if (PyObject_SetAttr(self->writer, str_sent_to, endobj) < 0 ||
            PyObject_SetAttr(self->writer, str_behind, Py_None) < 0 || (got = lock_try(self->lock)) < 0) {
            fail = 1;
            goto done;
        }
        status = 2;
        if (got) {
            /* Let go under the connection's lock, as Writer.send_held does: a thread that
             * buffered bytes and found the send lock taken is sure they are seen. */
            if (PyByteArray_GET_SIZE(self->buffer) == 0) {
                send_lock->owner = 0;
                PyThread_release_lock(send_lock->lock);
                status = 1;
            }
            if (lock_release(self->lock) < 0) {
                fail = 1;
            }
        }
        goto done;
    }
    Py_ssize_t sent = n < 0 ? 0 : n;
    PyObject *rest = PyBytes_FromStringAndSize(PyBytes_AS_STRING(frame) + sent, len - sent);
    if (rest == NULL || PyObject_SetAttr(transport, str_backlog, rest) < 0 ||
        PyObject_SetAttr(self->writer, str_behind, transport) < 0) {
        Py_XDECREF(rest);
        fail = 1;
        goto done;
    }
    Py_DECREF(rest);
    status = 3;
    goto done;

unlock:
    if (lock_release(self->lock) < 0) {
        fail = 1;
    }
release_closing:
    if (closing_held && lock_release(closing) < 0) {
        fail = 1;
    }
done:
    Py_XDECREF(transport);
    Py_XDECREF(closing);
    Py_XDECREF(endobj);
    if (fail) {
        return NULL;
    }
    return PyLong_FromLong(status);
}

static PyObject *
sender_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    Sender *self = (Sender *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->vectorcall = (vectorcallfunc)sender_call;
    }
    return (PyObject *)self;
}

static PyTypeObject SenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "natsjs_sync.protocol._speedups.Sender",
    .tp_basicsize = sizeof(Sender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Sender, vectorcall),
    .tp_doc = "Sender(writer, conn, lock, send_lock, buffer, outlet): a waiting caller's write "
              "that skips an idle writer's buffer.",
    .tp_new = sender_new,
    .tp_init = (initproc)sender_init,
    .tp_dealloc = (destructor)sender_dealloc,
    .tp_traverse = (traverseproc)sender_traverse,
    .tp_clear = (inquiry)sender_clear,
    .tp_call = PyVectorcall_Call,
};

/*
 * LanePut(lane, items, scheduled, dispatcher): a dispatcher lane's put in one
 * call (the Python twin, and the reference, is natsjs_sync._core.dispatch.
 * Lane._put with Dispatcher._schedule). The item is appended to items (the
 * lane's deque); when the lane's scheduled lock is free it is taken and the
 * lane queued on dispatcher._runq, and an idle worker's entry taken from
 * dispatcher._idle (a worker promised to it), or, with none left,
 * dispatcher._spawn() called. It runs on the reader thread for every message
 * of a callback subscription or a consume(): no Python frame per message.
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *lane, *items, *scheduled, *dispatcher;
} LanePut;

static PyObject *str_append, *str_put, *str_runq, *str_idle, *str_spawn, *str_schedule;

static PyObject *
lane_put_call(LanePut *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "a lane's put takes one item");
        return NULL;
    }
    if (self->lane == NULL || self->items == NULL || self->scheduled == NULL || self->dispatcher == NULL) {
        PyErr_SetString(PyExc_TypeError, "LanePut was not initialised");
        return NULL;
    }
    PyObject *r = PyObject_CallMethodOneArg(self->items, str_append, args[0]);
    if (r == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    /* A lane already scheduled finds the item: its worker looks again after it lets go. */
    int got = lock_try(self->scheduled);
    if (got <= 0) {
        return got < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *idle = PyObject_GetAttr(self->dispatcher, str_idle);
    if (idle == NULL) {
        return NULL;
    }
    if (!PyList_CheckExact(idle)) {
        Py_DECREF(idle);
        return PyObject_CallMethodOneArg(self->dispatcher, str_schedule, self->lane);
    }
    PyObject *runq = PyObject_GetAttr(self->dispatcher, str_runq);
    r = runq == NULL ? NULL : PyObject_CallMethodOneArg(runq, str_put, self->lane);
    Py_XDECREF(runq);
    if (r == NULL) {
        Py_DECREF(idle);
        return NULL;
    }
    Py_DECREF(r);
    Py_ssize_t n = PyList_GET_SIZE(idle);
    if (n > 0) { /* idle.pop(): an idle worker is promised to this lane */
        int failed = PyList_SetSlice(idle, n - 1, n, NULL);
        Py_DECREF(idle);
        return failed ? NULL : Py_NewRef(Py_None);
    }
    Py_DECREF(idle);
    return PyObject_CallMethodNoArgs(self->dispatcher, str_spawn);
}

static int
lane_put_traverse(LanePut *self, visitproc visit, void *arg)
{
    Py_VISIT(self->lane);
    Py_VISIT(self->items);
    Py_VISIT(self->scheduled);
    Py_VISIT(self->dispatcher);
    return 0;
}

static int
lane_put_clear(LanePut *self)
{
    Py_CLEAR(self->lane);
    Py_CLEAR(self->items);
    Py_CLEAR(self->scheduled);
    Py_CLEAR(self->dispatcher);
    return 0;
}

static void
lane_put_dealloc(LanePut *self)
{
    PyObject_GC_UnTrack(self);
    lane_put_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
lane_put_init(LanePut *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"lane", "items", "scheduled", "dispatcher", NULL};
    PyObject *lane, *items, *scheduled, *dispatcher;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO", kwlist, &lane, &items, &scheduled, &dispatcher)) {
        return -1;
    }
    PyObject *refs[] = {lane, items, scheduled, dispatcher};
    PyObject **slots[] = {&self->lane, &self->items, &self->scheduled, &self->dispatcher};
    for (int i = 0; i < 4; i++) {
        Py_INCREF(refs[i]);
        Py_XSETREF(*slots[i], refs[i]);
    }
    return 0;
}

static PyObject *
lane_put_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    LanePut *self = (LanePut *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->vectorcall = (vectorcallfunc)lane_put_call;
    }
    return (PyObject *)self;
}

static PyTypeObject LanePutType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "natsjs_sync.protocol._speedups.LanePut",
    .tp_basicsize = sizeof(LanePut),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(LanePut, vectorcall),
    .tp_doc = "LanePut(lane, items, scheduled, dispatcher): a dispatcher lane's put in one call.",
    .tp_new = lane_put_new,
    .tp_init = (initproc)lane_put_init,
    .tp_dealloc = (destructor)lane_put_dealloc,
    .tp_traverse = (traverseproc)lane_put_traverse,
    .tp_clear = (inquiry)lane_put_clear,
    .tp_call = PyVectorcall_Call,
};

/*
 * typed_of(msg, blocks, plain, cls) -> cls(msg, value, codec) or None
 *
 * A typed reader's common case in one call (the Python twin, and the
 * reference, is natsjs_sync.codecs.typed.typed_of_py): the decoder is
 * plain's for a message without headers, else the one blocks holds for its
 * exact header block (blocks: header block -> (codec, decode), plain: (codec,
 * decode)); value = decode(msg.data). None when there is none or decode raises
 * an Exception (the caller's slow path then decides, and words the error).
 * The result is built as cls.__init__(msg, value, codec) would, its slots
 * filled at the offsets setup_typed() read.
 */
static PyTypeObject *typed_base = NULL;
static Py_ssize_t off_t_msg, off_t_value, off_t_codec;

static PyObject *
setup_typed(PyObject *Py_UNUSED(self), PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "setup_typed() takes the TypedMsg class");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)cls;
    if (slot_offset(t, "msg", &off_t_msg) < 0 || slot_offset(t, "value", &off_t_value) < 0 ||
        slot_offset(t, "codec", &off_t_codec) < 0) {
        return NULL;
    }
    Py_XDECREF(typed_base);
    Py_INCREF(cls);
    typed_base = t;
    Py_RETURN_NONE;
}

/* typed_of's work, its arguments checked: a new reference, Py_None (new), or NULL with an error. */
static PyObject *
typed_of_impl(PyObject *msg, PyObject *blocks, PyObject *plain, PyTypeObject *cls)
{
    PyObject *hdr, *data;
    if (msg_base != NULL && PyObject_TypeCheck(msg, msg_base) && Py_TYPE(msg)->tp_basicsize == msg_base->tp_basicsize) {
        hdr = *(PyObject **)((char *)msg + off_hdr);
        data = *(PyObject **)((char *)msg + off_data);
        if (hdr == NULL || data == NULL) {
            Py_RETURN_NONE; /* unset slots: the slow path says what is wrong */
        }
        Py_INCREF(hdr);
        Py_INCREF(data);
    } else {
        hdr = PyObject_GetAttrString(msg, "raw_headers");
        data = hdr == NULL ? NULL : PyObject_GetAttrString(msg, "data");
        if (data == NULL) {
            Py_XDECREF(hdr);
            if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                return NULL;
            }
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    PyObject *hit;
    if (hdr == Py_None) {
        hit = plain;
    } else if (PyBytes_CheckExact(hdr)) {
        hit = PyDict_GetItemWithError(blocks, hdr); /* borrowed; a bytes key runs no Python code */
        if (hit == NULL && PyErr_Occurred()) {
            Py_DECREF(hdr);
            Py_DECREF(data);
            return NULL;
        }
    } else {
        hit = NULL;
    }
    Py_DECREF(hdr);
    if (hit == NULL || !PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 2) {
        Py_DECREF(data);
        Py_RETURN_NONE;
    }
    Py_INCREF(hit); /* held while decode runs Python code */
    PyObject *value = PyObject_CallOneArg(PyTuple_GET_ITEM(hit, 1), data);
    Py_DECREF(data);
    if (value == NULL) {
        Py_DECREF(hit);
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            return NULL;
        }
        PyErr_Clear(); /* the codec's own error: the slow path makes ours of it */
        Py_RETURN_NONE;
    }
    PyObject *out = cls->tp_alloc(cls, 0);
    if (out == NULL) {
        Py_DECREF(hit);
        Py_DECREF(value);
        return NULL;
    }
    PyObject *codec = PyTuple_GET_ITEM(hit, 0);
    Py_INCREF(codec);
    Py_DECREF(hit);
    Py_INCREF(msg);
    set_slot(out, off_t_msg, msg);
    set_slot(out, off_t_value, value);
    set_slot(out, off_t_codec, codec);
    return out;
}

static int
typed_args_ok(PyObject *blocks, PyObject *cls)
{
    if (!PyDict_Check(blocks) || typed_base == NULL || cls != (PyObject *)typed_base) {
        PyErr_SetString(PyExc_TypeError, "typed_of() needs a dict and the TypedMsg class after setup_typed()");
        return 0;
    }
    return 1;
}

static PyObject *
typed_of(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "typed_of(msg, blocks: dict, plain, cls: type)");
        return NULL;
    }
    if (!typed_args_ok(args[1], args[3])) {
        return NULL;
    }
    return typed_of_impl(args[0], args[1], args[2], (PyTypeObject *)args[3]);
}

/*
 * TypedNext(read, blocks, plain, cls, after, full, default, clock): a typed
 * reader's next_msg in one call (the Python method, and the reference, is
 * natsjs_sync.codecs.typed._read_next). Called with a timeout (by position or
 * as timeout=) or none (then default): started = clock() (None when clock is
 * None), msg = read(timeout), then typed_of(msg, blocks, plain, cls); when
 * that gives None, after(msg, timeout, started) decides (the time the read
 * started bounds what comes after a dead letter). Any other call goes to
 * full(...) as made.
 *
 * With empty (an exception class) and on_empty, read is the source's next_msg
 * in parts: read raising empty is the wait that timed out, and on_empty(timeout)
 * raises the source's error for it (a subscription gives its inlet's take,
 * queue.Empty and the method that words its TimeoutError: no Python frame per
 * message between this call and the queue).
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *next, *blocks, *plain, *cls, *after, *full, *dflt, *clock;
    PyObject *empty, *on_empty; /* NULL: read raises what it raises */
} TypedNext;

static PyObject *str_timeout; /* interned at import */

static int
tnext_traverse(TypedNext *self, visitproc visit, void *arg)
{
    Py_VISIT(self->next);
    Py_VISIT(self->blocks);
    Py_VISIT(self->plain);
    Py_VISIT(self->cls);
    Py_VISIT(self->after);
    Py_VISIT(self->full);
    Py_VISIT(self->dflt);
    Py_VISIT(self->clock);
    Py_VISIT(self->empty);
    Py_VISIT(self->on_empty);
    return 0;
}

static int
tnext_clear(TypedNext *self)
{
    Py_CLEAR(self->next);
    Py_CLEAR(self->blocks);
    Py_CLEAR(self->plain);
    Py_CLEAR(self->cls);
    Py_CLEAR(self->after);
    Py_CLEAR(self->full);
    Py_CLEAR(self->dflt);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->empty);
    Py_CLEAR(self->on_empty);
    return 0;
}

static void
tnext_dealloc(TypedNext *self)
{
    PyObject_GC_UnTrack(self);
    tnext_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
tnext_init(TypedNext *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"read", "blocks", "plain", "cls", "after", "full", "default", "clock", "empty",
                             "on_empty", NULL};
    PyObject *next, *blocks, *plain, *cls, *after, *full, *dflt, *clock, *empty = Py_None, *on_empty = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOO|OO", kwlist, &next, &blocks, &plain, &cls, &after, &full,
                                     &dflt, &clock, &empty, &on_empty)) {
        return -1;
    }
    if (!typed_args_ok(blocks, cls)) {
        return -1;
    }
    if ((empty == Py_None) != (on_empty == Py_None) ||
        (empty != Py_None && !PyExceptionClass_Check(empty))) {
        PyErr_SetString(PyExc_TypeError, "TypedNext() takes empty (an exception class) and on_empty together");
        return -1;
    }
    if (empty == Py_None) {
        Py_CLEAR(self->empty);
        Py_CLEAR(self->on_empty);
    } else {
        Py_INCREF(empty);
        Py_XSETREF(self->empty, empty);
        Py_INCREF(on_empty);
        Py_XSETREF(self->on_empty, on_empty);
    }
    Py_INCREF(next);
    Py_XSETREF(self->next, next);
    Py_INCREF(blocks);
    Py_XSETREF(self->blocks, blocks);
    Py_INCREF(plain);
    Py_XSETREF(self->plain, plain);
    Py_INCREF(cls);
    Py_XSETREF(self->cls, cls);
    Py_INCREF(after);
    Py_XSETREF(self->after, after);
    Py_INCREF(full);
    Py_XSETREF(self->full, full);
    Py_INCREF(dflt);
    Py_XSETREF(self->dflt, dflt);
    Py_INCREF(clock);
    Py_XSETREF(self->clock, clock);
    return 0;
}

static PyObject *
tnext_call(TypedNext *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (self->next == NULL || self->full == NULL || self->after == NULL || self->clock == NULL) {
        PyErr_SetString(PyExc_TypeError, "TypedNext was not initialised");
        return NULL;
    }
    PyObject *timeout = NULL;
    if (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0) {
        if (nargs == 1) {
            timeout = args[0];
        } else if (nargs == 0) {
            timeout = self->dflt;
        }
    } else if (nargs == 0 && PyTuple_GET_SIZE(kwnames) == 1) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, 0);
        if (key == str_timeout || (PyUnicode_Check(key) && PyUnicode_Compare(key, str_timeout) == 0)) {
            timeout = args[0];
        }
    }
    if (timeout == NULL) {
        return PyObject_Vectorcall(self->full, args, nargsf, kwnames);
    }
    Py_INCREF(timeout);
    PyObject *started;
    if (self->clock == Py_None) {
        started = Py_None;
        Py_INCREF(started);
    } else {
        started = PyObject_CallNoArgs(self->clock);
        if (started == NULL) {
            Py_DECREF(timeout);
            return NULL;
        }
    }
    PyObject *msg = PyObject_CallOneArg(self->next, timeout);
    if (msg == NULL) {
        PyObject *res = NULL;
        if (self->empty != NULL && PyErr_ExceptionMatches(self->empty)) {
            PyErr_Clear(); /* the wait timed out: the source words its error */
            PyObject *on_empty = self->on_empty;
            Py_INCREF(on_empty);
            res = PyObject_CallOneArg(on_empty, timeout);
            Py_DECREF(on_empty);
        }
        Py_DECREF(timeout);
        Py_DECREF(started);
        return res;
    }
    PyObject *typed = typed_of_impl(msg, self->blocks, self->plain, (PyTypeObject *)self->cls);
    if (typed != Py_None) {
        Py_DECREF(msg);
        Py_DECREF(timeout);
        Py_DECREF(started);
        return typed; /* the TypedMsg, or NULL with the error */
    }
    Py_DECREF(typed);
    PyObject *argv[3] = {msg, timeout, started};
    PyObject *res = PyObject_Vectorcall(self->after, argv, 3, NULL);
    Py_DECREF(msg);
    Py_DECREF(timeout);
    Py_DECREF(started);
    return res;
}

static PyObject *
tnext_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    TypedNext *self = (TypedNext *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->vectorcall = (vectorcallfunc)tnext_call;
    }
    return (PyObject *)self;
}

static PyTypeObject TypedNextType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "natsjs_sync.protocol._speedups.TypedNext",
    .tp_basicsize = sizeof(TypedNext),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(TypedNext, vectorcall),
    .tp_doc = "TypedNext(read, blocks, plain, cls, after, full, default, clock, empty=None, on_empty=None): "
              "a typed next_msg in one call.",
    .tp_new = tnext_new,
    .tp_init = (initproc)tnext_init,
    .tp_dealloc = (destructor)tnext_dealloc,
    .tp_traverse = (traverseproc)tnext_traverse,
    .tp_clear = (inquiry)tnext_clear,
    .tp_call = PyVectorcall_Call,
};

/*
 * TypedPublish(subject, block, encode, outlet, slow, strict, headed): a typed
 * publish's common case in one call (the Python method, and the reference, is
 * natsjs_sync.codecs.typed._publish). Called with the value alone, it does
 * what the reference does, each step once: data = encode(value) (on an
 * Exception, data = strict(value), the codec's encode, which raises the
 * PayloadEncodeError), then outlet(subject, data, block); True from it is the
 * publish done, anything else hands the same data to headed(subject, data,
 * block), the general path. Other arguments go to slow(...) as called.
 * Errors of strict, the outlet and headed propagate, as from the method.
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *subject, *block, *encode, *outlet, *slow, *strict, *headed;
} TypedPublish;

static int
tpub_traverse(TypedPublish *self, visitproc visit, void *arg)
{
    Py_VISIT(self->subject);
    Py_VISIT(self->block);
    Py_VISIT(self->encode);
    Py_VISIT(self->outlet);
    Py_VISIT(self->slow);
    Py_VISIT(self->strict);
    Py_VISIT(self->headed);
    return 0;
}

static int
tpub_clear(TypedPublish *self)
{
    Py_CLEAR(self->subject);
    Py_CLEAR(self->block);
    Py_CLEAR(self->encode);
    Py_CLEAR(self->outlet);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->strict);
    Py_CLEAR(self->headed);
    return 0;
}

static void
tpub_dealloc(TypedPublish *self)
{
    PyObject_GC_UnTrack(self);
    tpub_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
tpub_init(TypedPublish *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"subject", "block", "encode", "outlet", "slow", "strict", "headed", NULL};
    PyObject *subject, *block, *encode, *outlet, *slow, *strict, *headed;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "UO!OOOOO", kwlist, &subject, &PyBytes_Type, &block, &encode,
                                     &outlet, &slow, &strict, &headed)) {
        return -1;
    }
    Py_INCREF(subject);
    Py_XSETREF(self->subject, subject);
    Py_INCREF(block);
    Py_XSETREF(self->block, block);
    Py_INCREF(encode);
    Py_XSETREF(self->encode, encode);
    Py_INCREF(outlet);
    Py_XSETREF(self->outlet, outlet);
    Py_INCREF(slow);
    Py_XSETREF(self->slow, slow);
    Py_INCREF(strict);
    Py_XSETREF(self->strict, strict);
    Py_INCREF(headed);
    Py_XSETREF(self->headed, headed);
    return 0;
}

static PyObject *
tpub_call(TypedPublish *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (self->slow == NULL || self->encode == NULL || self->outlet == NULL || self->strict == NULL ||
        self->headed == NULL) {
        PyErr_SetString(PyExc_TypeError, "TypedPublish was not initialised");
        return NULL;
    }
    if (nargs != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    }
    PyObject *data = PyObject_CallOneArg(self->encode, args[0]);
    if (data == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            return NULL;
        }
        PyErr_Clear(); /* the codec's own error: its encode() makes ours of it (or encodes after all) */
        data = PyObject_CallOneArg(self->strict, args[0]);
        if (data == NULL) {
            return NULL;
        }
    }
    PyObject *argv[3] = {self->subject, data, self->block};
    PyObject *r = PyObject_Vectorcall(self->outlet, argv, 3, NULL);
    if (r == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    int done = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (done < 0) {
        Py_DECREF(data);
        return NULL;
    }
    if (!done) { /* not connected, a subject not seen yet...: the general path, with the same payload */
        r = PyObject_Vectorcall(self->headed, argv, 3, NULL);
        Py_DECREF(data);
        if (r == NULL) {
            return NULL;
        }
        Py_DECREF(r);
        Py_RETURN_NONE;
    }
    Py_DECREF(data);
    Py_RETURN_NONE;
}

static PyObject *
tpub_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    TypedPublish *self = (TypedPublish *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->vectorcall = (vectorcallfunc)tpub_call;
    }
    return (PyObject *)self;
}

static PyTypeObject TypedPublishType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "natsjs_sync.protocol._speedups.TypedPublish",
    .tp_basicsize = sizeof(TypedPublish),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(TypedPublish, vectorcall),
    .tp_doc = "TypedPublish(subject, block, encode, outlet, slow, strict, headed): a typed publish in one call.",
    .tp_new = tpub_new,
    .tp_init = (initproc)tpub_init,
    .tp_dealloc = (destructor)tpub_dealloc,
    .tp_traverse = (traverseproc)tpub_traverse,
    .tp_clear = (inquiry)tpub_clear,
    .tp_call = PyVectorcall_Call,
};

/*
 * cached_block(headers, blocks) -> bytes | None
 *
 * The header block blocks holds for headers when headers is a plain dict of
 * 1 to 8 pairs of exact str (the key is the tuple of its pairs, in order),
 * else None. The Python twin, and the reference, is
 * natsjs_sync.protocol.headers.cached_block_py (8 is its _PAIRS_MAX). Only
 * exact str go into the key: hashing and comparing them runs no Python code.
 */
#define CACHED_PAIRS_MAX 8

static PyObject *
cached_block(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "cached_block(headers, blocks: dict)");
        return NULL;
    }
    PyObject *headers = args[0];
    if (!PyDict_CheckExact(headers)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyDict_GET_SIZE(headers);
    if (n <= 0 || n > CACHED_PAIRS_MAX) {
        Py_RETURN_NONE;
    }
    PyObject *key = PyTuple_New(n); /* unset items are NULL: freed as such on an early exit */
    if (key == NULL) {
        return NULL;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *v;
    while (PyDict_Next(headers, &pos, &k, &v)) {
        if (i >= n || !PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v)) {
            Py_DECREF(key);
            Py_RETURN_NONE;
        }
        PyObject *pair = PyTuple_Pack(2, k, v);
        if (pair == NULL) {
            Py_DECREF(key);
            return NULL;
        }
        PyTuple_SET_ITEM(key, i, pair);
        i++;
    }
    if (i != n) {
        Py_DECREF(key);
        Py_RETURN_NONE;
    }
    PyObject *block = PyDict_GetItemWithError(args[1], key); /* borrowed */
    Py_DECREF(key);
    if (block == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    Py_INCREF(block);
    return block;
}

static PyMethodDef methods[] = {
    {"setup", (PyCFunction)setup, METH_O, "Read the slot offsets of the Msg class."},
    {"accepts", (PyCFunction)accepts, METH_O, "Whether scan() can build instances of this class."},
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(buf, pos, cls, max_payload, max_control_line) -> (messages, new_pos)"},
    {"ack_tail", (PyCFunction)(void (*)(void))ack_tail, METH_FASTCALL,
     "ack_tail(reply, prefix) -> (stream_seq, consumer_seq) or None"},
    {"setup_typed", (PyCFunction)setup_typed, METH_O, "Read the slot offsets of the TypedMsg class."},
    {"typed_of", (PyCFunction)(void (*)(void))typed_of, METH_FASTCALL,
     "typed_of(msg, blocks, plain, cls) -> a TypedMsg, or None: the slow path decides"},
    {"send_nowait", (PyCFunction)(void (*)(void))send_nowait, METH_FASTCALL,
     "send_nowait(fd, data[, owner, record]) -> int: one send that never waits; the bytes taken "
     "(0: none); with owner, owner.written = record once data is taken whole"},
    {"cached_block", (PyCFunction)(void (*)(void))cached_block, METH_FASTCALL,
     "cached_block(headers, blocks) -> the block cached for a plain dict of str pairs, or None"},
    {"route_run", (PyCFunction)(void (*)(void))route_run, METH_FASTCALL,
     "route_run(events, start, routes, cls, stats) -> stop: count a run of messages, then route it"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups", "Compiled fast path of the NATS parser.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    /* The longest wait threading accepts: take() waits itself only below it
     * (the queue's get raises OverflowError at or above it); the timeout rule
     * in Python treats longer waits as "no limit". */
    PyObject *threading = PyImport_ImportModule("threading");
    if (threading == NULL) {
        return NULL;
    }
    PyObject *wait_max = PyObject_GetAttrString(threading, "TIMEOUT_MAX");
    threading_module = threading; /* kept: ReplyRoute.prepare makes its locks with threading.Lock */
    if (wait_max == NULL) {
        return NULL;
    }
    take_wait_max = PyFloat_AsDouble(wait_max);
    Py_DECREF(wait_max);
    if (take_wait_max == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    if (PyType_Ready(&InletType) < 0 || PyType_Ready(&OutletType) < 0 || PyType_Ready(&RoleType) < 0 ||
        PyType_Ready(&SendLockType) < 0 || PyType_Ready(&TypedNextType) < 0 ||
        PyType_Ready(&TypedPublishType) < 0 || PyType_Ready(&SenderType) < 0 || PyType_Ready(&ReplyRouteType) < 0 ||
        PyType_Ready(&LanePutType) < 0 || PyType_Ready(&FeedType) < 0) {
        return NULL;
    }
    str_timeout = PyUnicode_InternFromString("timeout");
    str_written = PyUnicode_InternFromString("written");
    if (str_timeout == NULL || str_written == NULL) {
        return NULL;
    }
    const char *names[] = {"_front", "_holes", "_behind", "_broken", "taken", "sent_to", "transport", "direct",
                           "_closing", "_backlog", "end", "acquire", "release", "fileno", "waiting",
                           "prefix_len", "replied_to", "route", "append", "put", "_runq", "_idle", "_spawn",
                           "_schedule", "feed", "_parse_rest", "_pending", "_tokens", "prefix_bytes",
                           "Lock"};
    PyObject **interned[] = {&str_front, &str_holes, &str_behind, &str_broken, &str_taken, &str_sent_to,
                             &str_transport, &str_direct, &str_closing, &str_backlog, &str_end, &str_acquire,
                             &str_release, &str_fileno, &str_waiting, &str_prefix_len, &str_replied_to,
                             &str_route, &str_append, &str_put, &str_runq, &str_idle, &str_spawn,
                             &str_schedule, &str_feed, &str_parse_rest, &str_pending, &str_tokens,
                             &str_prefix_bytes, &str_Lock};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if ((*interned[i] = PyUnicode_InternFromString(names[i])) == NULL) {
            return NULL;
        }
    }
    str_in_msgs = PyUnicode_InternFromString("in_msgs");
    str_in_bytes = PyUnicode_InternFromString("in_bytes");
    if (str_in_msgs == NULL || str_in_bytes == NULL) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&InletType);
    if (PyModule_AddObject(m, "Inlet", (PyObject *)&InletType) < 0) {
        Py_DECREF(&InletType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&OutletType);
    if (PyModule_AddObject(m, "Outlet", (PyObject *)&OutletType) < 0) {
        Py_DECREF(&OutletType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&RoleType);
    if (PyModule_AddObject(m, "ReadRole", (PyObject *)&RoleType) < 0) {
        Py_DECREF(&RoleType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&SendLockType);
    if (PyModule_AddObject(m, "SendLock", (PyObject *)&SendLockType) < 0) {
        Py_DECREF(&SendLockType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&SenderType);
    if (PyModule_AddObject(m, "Sender", (PyObject *)&SenderType) < 0) {
        Py_DECREF(&SenderType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&ReplyRouteType);
    if (PyModule_AddObject(m, "ReplyRoute", (PyObject *)&ReplyRouteType) < 0) {
        Py_DECREF(&ReplyRouteType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FeedType);
    if (PyModule_AddObject(m, "Feed", (PyObject *)&FeedType) < 0) {
        Py_DECREF(&FeedType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&LanePutType);
    if (PyModule_AddObject(m, "LanePut", (PyObject *)&LanePutType) < 0) {
        Py_DECREF(&LanePutType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&TypedNextType);
    if (PyModule_AddObject(m, "TypedNext", (PyObject *)&TypedNextType) < 0) {
        Py_DECREF(&TypedNextType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&TypedPublishType);
    if (PyModule_AddObject(m, "TypedPublish", (PyObject *)&TypedPublishType) < 0) {
        Py_DECREF(&TypedPublishType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
