"""A CudaKernel's declaration checked against the C prototype of its entry, where the source says it.

Pure text: the ``__global__`` function ``entry`` names is found in the source, and what the
declaration promises is compared with what the C says: as many parameters as ``signature``
has tokens; A and B pointers of the element type ``precision`` stores (``float``, ``__half``,
``__nv_bfloat16``) and C a ``float`` pointer; M, N, K 32-bit integers and alpha, beta
``float``; a template instantiation (``mm<16>``) only of a template, with values where it
takes values and types where it takes types. What the source does not spell out plainly (a
macro, a template type ``T``, a typedef, overloads) is not judged: NVRTC has the last word.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

#: Said to a kernel written for square matrices only (a tutorial's kernel(A, B, C, N)).
SQUARE_HINT = ("a kernel written for square matrices (one size N) is also run on non-square shapes here: give it "
               "M, N and K (A is M x K, B is K x N, C is M x N, row-major) and use each where N stood for it")

#: Said where a kernel's parameters are not the contract's: the way to test it unchanged.
LAUNCHER_HINT = ("or, to test the kernel unchanged, call it from a Python launcher that passes its own arguments "
                 "(@kernel with builds=: docs/kernels.md, 'Kernels from another repository')")

#: Element types of the A and B pointers for each precision, and their spellings in C.
_ELEMENT = {"float": "float", "double": "double", "__half": "__half", "half": "__half",
            "__nv_bfloat16": "__nv_bfloat16", "nv_bfloat16": "__nv_bfloat16", "int": "int",
            "short": "short", "unsigned short": "unsigned short", "uint16_t": "unsigned short",
            "char": "char", "signed char": "signed char", "unsigned char": "unsigned char", "int8_t": "signed char"}
_WANT_AB = {"fp32": "float", "tf32": "float", "fp16": "__half", "bf16": "__nv_bfloat16"}
_INT32 = {"int", "signed", "signed int", "unsigned", "unsigned int", "int32_t", "uint32_t"}
_SCALARS = {"size_t", "long", "long long", "unsigned long", "unsigned long long", "int64_t", "uint64_t",
            "float", "double", "short", "char", "bool", "__half", "half"} | _INT32
_FLOATING = {"float", "double", "__half", "half"}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|register)\b")
_TYPE_WORDS = {"float", "double", "int", "unsigned", "signed", "short", "long", "char", "bool", "half", "__half",
               "__nv_bfloat16", "nv_bfloat16", "size_t", "int32_t", "uint32_t", "int64_t", "uint64_t"}


@dataclass(frozen=True)
class Prototype:
    name: str
    template: str | None      # the text inside template<...>, or None
    params: tuple[str, ...]   # each parameter's declaration, as written


def _balanced(text: str, start: int, open_: str, close: str) -> int | None:
    """Index just past the bracket matching the one at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _split(text: str) -> list[str]:
    """Split at commas outside brackets."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def _strip_comments(source: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)


def _template_before(text: str, at: int) -> str | None:
    """The ``template <...>`` parameters just before position ``at`` (None when not a template)."""
    head = re.sub(r"(\s|\bstatic\b|\binline\b|\bextern\s*\"C\"|__forceinline__)+$", "", text[:at])
    if not head.endswith(">"):
        return None
    depth = 0
    for i in range(len(head) - 1, -1, -1):
        depth += {">": 1, "<": -1}.get(head[i], 0)
        if depth == 0:
            return head[i + 1:-1].strip() if re.search(r"\btemplate\s*$", head[:i]) else None
    return None


def find(source: str, name: str) -> Prototype | None:
    """The one ``__global__`` function called ``name`` (None when absent or overloaded)."""
    text = _strip_comments(source)
    pattern = re.compile(r"__global__\s+(?:[\w:]+\s+)*?(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
                         r"(?:__launch_bounds__\s*\([^)]*\)\s*)?" + re.escape(name) + r"\s*\(")
    found = []
    for match in pattern.finditer(text):
        end = _balanced(text, match.end() - 1, "(", ")")
        if end is None:
            return None
        params = tuple(p for p in _split(text[match.end():end - 1]) if p and p != "void")
        found.append(Prototype(name, _template_before(text, match.start()), params))
    return found[0] if len(found) == 1 else None


def _param_type(param: str) -> tuple[str, int] | None:
    """(base type, pointer depth) of a parameter declaration such as ``const float* __restrict__ A``."""
    if "[" in param or "(" in param or "=" in param or "&" in param:
        return None
    words = _QUALIFIERS.sub(" ", param).replace("*", " * ").split()
    depth = words.count("*")
    words = [w for w in words if w != "*"]
    if len(words) >= 2 and words[-1] not in _TYPE_WORDS:
        words = words[:-1]  # the parameter's name
    return " ".join(words), depth


def _template_kind(param: str) -> str | None:
    """"type" for ``typename T``/``class T``, "value" for ``int BM``, None when unclear."""
    first = param.split("=")[0].split()
    if not first:
        return None
    if first[0] in ("typename", "class"):
        return "type"
    if " ".join(first[:-1]) in _INT32 | {"bool", "size_t", "long", "unsigned long", "int64_t"} or first[0] in _INT32:
        return "value"
    return None


def _arg_kind(arg: str) -> str | None:
    arg = arg.strip()
    if re.fullmatch(r"[-+]?\(?\s*[0-9][0-9xXa-fA-FuUlL]*\s*\)?|true|false|[0-9\s+\-*/()]+", arg):
        return "value"
    if _QUALIFIERS.sub(" ", arg).replace("*", " ").split() and \
            all(w in _TYPE_WORDS for w in _QUALIFIERS.sub(" ", arg).replace("*", " ").split()):
        return "type"
    return None


def _square_only(params: list[str] | tuple[str, ...]) -> bool:
    """Three pointers, then one integer by value: a tutorial's kernel(A, B, C, N) for square matrices."""
    typed = [_param_type(p) for p in params]
    if len(typed) != 4 or None in typed:
        return False
    *pointers, (kind, depth) = typed  # type: ignore[misc]
    return all(d > 0 for _, d in pointers) and depth == 0 and kind in _SCALARS and kind not in _FLOATING


def problems(source: str, filename: str, entry: str, tokens: tuple[str, ...] | None, precision: str) -> list[str]:
    """What the declaration gets wrong about the C prototype of ``entry`` (empty: nothing seen).
    ``tokens`` None: only the entry and its template arguments are judged (a launcher's build)."""
    base, _, rest = entry.partition("<")
    base = base.strip()
    args = _split(rest[:rest.rfind(">")]) if rest else None
    proto = find(source, base)
    if proto is None:
        return []
    out: list[str] = []
    where = f"{base} in {filename}"
    if args is not None and proto.template is None:
        out.append(f"entry {entry!r} instantiates a template, but {where} is not a template; "
                   f"write entry={base!r}, or declare it template<...> __global__ void {base}(...)")
        return out
    if args is None and proto.template is not None:
        out.append(f"{where} is a template <{proto.template}>; entry must name one instantiation, "
                   f"e.g. entry=\"{base}<...>\" with its template arguments")
        return out
    if args is not None and proto.template is not None:
        tparams = _split(proto.template)
        required = [p for p in tparams if "=" not in p]
        if not (len(required) <= len(args) <= len(tparams)) and not any("..." in p for p in tparams):
            out.append(f"entry {entry!r} gives {len(args)} template argument(s), but {where} is "
                       f"template <{proto.template}>")
        for arg, tparam in zip(args, tparams):
            want, got = _template_kind(tparam), _arg_kind(arg)
            if want and got and want != got:
                example = "a number such as 16" if want == "value" else "a type such as float"
                out.append(f"entry {entry!r}: template argument {arg!r} is a {got}, but {where} declares "
                           f"{tparam!r} (a {want}): give {example}")
    if tokens is None or any("..." in p or "#" in p for p in proto.params):  # variadic, or -D-picked parameters
        return out
    if len(proto.params) != len(tokens):
        out.append(f"signature {','.join(tokens)!r} has {len(tokens)} tokens, but {where} takes "
                   f"{len(proto.params)} parameters ({', '.join(proto.params)}); the signature names the C "
                   f"parameters in order, one token each" + (f"; {SQUARE_HINT}" if _square_only(proto.params) else
                                                             f"; {LAUNCHER_HINT}"))
        return out
    for token, param in zip(tokens, proto.params):
        typed = _param_type(param)
        if typed is None:
            continue
        kind, depth = typed
        if token in ("A", "B", "C"):
            want = "float" if token == "C" else _WANT_AB[precision]
            got = _ELEMENT.get(kind)
            bits = token != "C" and precision in ("fp16", "bf16") and got in ("unsigned short", "short")  # bit patterns
            if depth == 1 and got is not None and got != want and not bits:
                why = "C is float32 for every precision" if token == "C" else f"precision={precision!r} stores {token} as {want}"
                out.append(f"parameter {param!r} of {where} is {token}, a {got} pointer, but {why}; "
                           f"declare it {want}* or give the precision it takes")
            elif depth == 0 and kind in _SCALARS:
                out.append(f"parameter {param!r} of {where} is {token} by the signature, which is a pointer; "
                           "check the order of the signature's tokens")
        elif token in ("M", "N", "K") and depth == 0 and kind in _SCALARS and kind not in _INT32:
            out.append(f"parameter {param!r} of {where} is {token}, passed as a 32-bit int; declare it int")
        elif token in ("alpha", "beta") and depth == 0 and kind in _SCALARS and kind != "float":
            out.append(f"parameter {param!r} of {where} is {token}, passed as a float32; declare it float")
        elif token in ("M", "N", "K", "alpha", "beta") and depth > 0 and kind in _SCALARS:
            out.append(f"parameter {param!r} of {where} is {token} by the signature, which is passed by value; "
                       "check the order of the signature's tokens")
    return out[:-1] + [f"{out[-1]}; {LAUNCHER_HINT}"] if out else out
