# The driver of an execbox Python session. execbox runs it as
#
#     python3 -u driver.py RESPONSE_FIFO
#
# with its standard input a pipe carrying requests, and its standard
# output and error pipes execbox keeps for diagnostics only. Requests and
# responses are frames: a 4-byte big-endian length, then that many bytes of
# UTF-8 JSON. User code never sees the request pipe (its fd 0 is replaced
# by /dev/null at once) nor the response FIFO (a close-on-exec descriptor),
# so nothing a cell prints or reads can be taken for a frame.
#
# Requests:  {"id": N, "nonce": NONCE, "code": SRC, "out": PATH,
#             "err": PATH, "in": PATH?, "limit": BYTES}
# Responses: {"t": "ready", "version": V}                  once, at start
#            {"t": "started", "id": N}                     cell N runs now
#            {"t": "interrupted", "id": N}                 SIGINT raised
#            {"t": "result", "id": N, "nonce": NONCE, "value": S?,
#             "exception": {"type", "message", "traceback"}?}
#
# A cell's stdout and stderr are the FIFOs OUT and ERR (and its stdin IN
# or /dev/null), installed on file descriptors 0, 1 and 2 for the cell's
# duration, so that subprocesses' output is captured too. SIGINT (execbox's
# timeout) raises KeyboardInterrupt only while a cell runs; it is blocked
# in the driver between cells, and a stale one is discarded before the
# next cell.

import ast
import builtins
import json
import linecache
import os
import signal
import struct
import sys
import traceback
import types

DRIVER = os.path.abspath(__file__)

in_cell = False
cell_id = 0


def on_sigint(signum, frame):
    if in_cell:
        send({"t": "interrupted", "id": cell_id})
        raise KeyboardInterrupt
    # Between cells: a stale interrupt for a cell that just ended.


def read_exact(fd, n):
    b = bytearray()
    while len(b) < n:
        chunk = os.read(fd, n - len(b))
        if not chunk:
            return None
        b += chunk
    return bytes(b)


def read_frame(fd):
    head = read_exact(fd, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    body = read_exact(fd, n)
    if body is None:
        return None
    return json.loads(body.decode("utf-8"))


resp_fd = -1


def send(msg):
    b = json.dumps(msg).encode("ascii")
    data = struct.pack(">I", len(b)) + b
    while data:
        n = os.write(resp_fd, data)
        data = data[n:]


def cut(s, limit):
    if limit <= 0 or len(s) <= limit:
        return s
    half = limit // 2
    return s[:half] + "\n[... %d characters omitted ...]\n" % (len(s) - 2 * half) + s[-half:]


def type_name(t):
    mod = getattr(t, "__module__", "builtins")
    if mod in ("builtins", "__main__", None):
        return t.__qualname__
    return mod + "." + t.__qualname__


def describe(e, limit):
    tb = e.__traceback__
    # Drop the driver's own frames at the top of the traceback.
    while tb is not None and tb.tb_frame.f_code.co_filename == DRIVER:
        tb = tb.tb_next
    if isinstance(e, SyntaxError) and tb is None:
        lines = traceback.format_exception_only(type(e), e)
    else:
        lines = traceback.format_exception(type(e), e, tb)
    try:
        msg = str(e)
    except BaseException:
        msg = "<unprintable %s>" % type(e).__name__
    return {
        "type": type_name(type(e)),
        "message": cut(msg, limit),
        "traceback": cut("".join(lines), limit),
    }


def run(code, filename, g):
    # Source lines of every cell stay available to tracebacks, also for
    # functions defined in one cell and failing in a later one.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    tree = ast.parse(code, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, filename, "exec"), g)
    if last is not None:
        return eval(compile(last, filename, "eval"), g)
    return None


def flush():
    for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if f is not None:
                f.flush()
        except BaseException:
            pass


def serve(req_fd, g, devnull, saved):
    global in_cell, cell_id
    req = read_frame(req_fd)
    if req is None:
        return False
    cid = req["id"]
    nonce = req.get("nonce", "")
    limit = req.get("limit", 0)
    value, exc = None, None
    out = err = inp = -1
    try:
        out = os.open(req["out"], os.O_WRONLY)
        err = os.open(req["err"], os.O_WRONLY)
        inp = os.open(req["in"], os.O_RDONLY) if req.get("in") else devnull
    except OSError as e:
        for fd in (out, err):
            if fd >= 0:
                os.close(fd)
        send({"t": "result", "id": cid, "nonce": nonce, "exception": describe(e, limit)})
        return True
    flush()
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.dup2(inp, 0)
    for fd in (out, err, inp):
        if fd != devnull:
            os.close(fd)
    # Discard an interrupt meant for an earlier cell.
    while signal.sigtimedwait([signal.SIGINT], 0) is not None:
        pass
    cell_id = cid
    send({"t": "started", "id": cid})
    try:
        in_cell = True
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
        try:
            result = run(req["code"], "<cell %d>" % cid, g)
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
            in_cell = False
        if result is not None:
            builtins._ = result
            value = cut(repr(result), limit)
    except BaseException as e:
        in_cell = False
        exc = describe(e, limit)
    flush()
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    os.dup2(devnull, 0)
    msg = {"t": "result", "id": cid, "nonce": nonce}
    if value is not None:
        msg["value"] = value
    if exc is not None:
        msg["exception"] = exc
    send(msg)
    return True


def main():
    global resp_fd, in_cell
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
    signal.signal(signal.SIGINT, on_sigint)
    # Requests come on fd 0; user code gets /dev/null there instead.
    req_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    resp_fd = os.open(sys.argv[1], os.O_WRONLY)
    saved = (os.dup(1), os.dup(2))
    # A REPL's view: the working directory first on sys.path (the
    # driver's own directory is not), a __main__ namespace, argv [''].
    if sys.path and sys.path[0] == os.path.dirname(DRIVER):
        sys.path[0] = ""
    else:
        sys.path.insert(0, "")
    sys.argv = [""]
    # Cells run in a fresh __main__ module, so that pickle and
    # "import __main__" find what they define, not the driver.
    main_mod = types.ModuleType("__main__")
    main_mod.__builtins__ = builtins
    sys.modules["__main__"] = main_mod
    g = main_mod.__dict__
    send({"t": "ready", "version": sys.version.split()[0]})
    while True:
        try:
            if not serve(req_fd, g, devnull, saved):
                return
        except KeyboardInterrupt:
            # A stray interrupt in the driver itself: keep serving.
            in_cell = False


main()
