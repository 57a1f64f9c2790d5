"""Header codecs: JSON (type 0), ROCKETMQ binary (type 1) and msgpack (our own type).

JSON header as a Java peer writes it (fastjson: null fields omitted, enums by name)::

    {"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,
     "serializeTypeCurrentRPC":"JSON","version":401}

ROCKETMQ binary header (big-endian)::

    code:i16 · language:u8 · version:i16 · opaque:i32 · flag:i32 ·
    remarkLen:i32 · remark · extLen:i32 · { keyLen:i16 · key · valLen:i32 · val }*

msgpack header: the array ``[code, language, version, opaque, flag, remark, extFields]``.

Decoders are tolerant in what they accept (any key order, missing remark/extFields,
``extFields`` null or with number/boolean values, language as name or number, a trailing newline) and
raise :class:`~pocketmq.remoting.errors.ProtocolError` for anything they cannot make sense of. Encoders always
write ``extFields`` values as strings.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import msgpack

from pocketmq.remoting.codes import LanguageCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import ProtocolError

_LANG_NAMES: dict[int, str] = {lang.value: lang.name for lang in LanguageCode}
_LANG_BY_NAME: dict[str, int] = {lang.name: lang.value for lang in LanguageCode}

# -- shared helpers -------------------------------------------------------------------------------------


def coerce_ext_value(value: object) -> str:
    """A header value as the string a Java peer would have sent (booleans as ``true``/``false``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _coerce_ext_fields(raw: object) -> dict[str, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ProtocolError(f"extFields must be an object, got {type(raw).__name__}")
    for v in raw.values():
        if type(v) is not str:
            break
    else:
        return raw  # the common case: every value already a string
    return {str(k): coerce_ext_value(v) for k, v in raw.items() if v is not None}


def _language(raw: object) -> int:
    if isinstance(raw, str):
        return _LANG_BY_NAME.get(raw.upper(), LanguageCode.OTHER)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    return LanguageCode.OTHER


def _int_field(d: dict[str, Any], key: str, default: int | None = None) -> int:
    value = d.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise ProtocolError(f"header field {key!r} must be an integer, got {value!r}")
    return value


def _remark(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ProtocolError(f"header field 'remark' must be a string, got {type(value).__name__}")


# -- JSON -----------------------------------------------------------------------------------------------


def encode_json_header(cmd: RemotingCommand) -> bytes:
    header: dict[str, object] = {"code": cmd.code}
    if cmd.ext_fields is not None:
        header["extFields"] = cmd.ext_fields
    header["flag"] = cmd.flag
    header["language"] = _LANG_NAMES.get(cmd.language, "OTHER")
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = cmd.version
    return json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()


def decode_json_header(data: bytes) -> RemotingCommand:
    try:
        header = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"undecodable JSON header: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("JSON header is not an object")
    return RemotingCommand(
        _int_field(header, "code"),
        opaque=_int_field(header, "opaque", 0),
        flag=_int_field(header, "flag", 0),
        remark=_remark(header.get("remark")),
        ext_fields=_coerce_ext_fields(header.get("extFields")),
        language=_language(header.get("language")),
        version=_int_field(header, "version", 0),
        serialize_type=SerializeType.JSON,
    )


# -- ROCKETMQ binary ----------------------------------------------------------------------------------

_FIXED = struct.Struct(">hBhii")  # code, language, version, opaque, flag = 13 bytes
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    parts = [_FIXED.pack(cmd.code, cmd.language & 0xFF, cmd.version, cmd.opaque, cmd.flag)]
    remark = cmd.remark.encode() if cmd.remark else b""
    parts.append(_I32.pack(len(remark)))
    parts.append(remark)
    ext = bytearray()
    for key, value in (cmd.ext_fields or {}).items():
        k = key.encode()
        v = coerce_ext_value(value).encode()
        ext += _I16.pack(len(k))
        ext += k
        ext += _I32.pack(len(v))
        ext += v
    parts.append(_I32.pack(len(ext)))
    parts.append(bytes(ext))
    return b"".join(parts)


def _take(data: bytes, pos: int, n: int, what: str) -> tuple[bytes, int]:
    end = pos + n
    if n < 0 or end > len(data):
        raise ProtocolError(f"ROCKETMQ header: {what} length {n} runs past the header ({len(data)} bytes)")
    return data[pos:end], end


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise ProtocolError(f"ROCKETMQ header: {what} is not UTF-8") from None


def decode_rocketmq_header(data: bytes) -> RemotingCommand:
    if len(data) < _FIXED.size + 8:
        raise ProtocolError(f"ROCKETMQ header too short: {len(data)} bytes")
    code, language, version, opaque, flag = _FIXED.unpack_from(data, 0)
    pos = _FIXED.size
    (remark_len,) = _I32.unpack_from(data, pos)
    raw_remark, pos = _take(data, pos + 4, remark_len, "remark")
    remark = _utf8(raw_remark, "remark") if remark_len > 0 else None
    if pos + 4 > len(data):
        raise ProtocolError("ROCKETMQ header: missing extFields length")
    (ext_len,) = _I32.unpack_from(data, pos)
    raw_ext, _ = _take(data, pos + 4, ext_len, "extFields")
    return RemotingCommand(
        code,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=_decode_binary_ext(raw_ext) if ext_len > 0 else None,
        language=language,
        version=version,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _decode_binary_ext(raw: bytes) -> dict[str, str]:
    fields: dict[str, str] = {}
    pos = 0
    while pos < len(raw):
        if pos + 2 > len(raw):
            raise ProtocolError("ROCKETMQ header: truncated extFields key length")
        (klen,) = _I16.unpack_from(raw, pos)
        key, pos = _take(raw, pos + 2, klen, "extFields key")
        if pos + 4 > len(raw):
            raise ProtocolError("ROCKETMQ header: truncated extFields value length")
        (vlen,) = _I32.unpack_from(raw, pos)
        value, pos = _take(raw, pos + 4, vlen, "extFields value")
        fields[_utf8(key, "extFields key")] = _utf8(value, "extFields value")
    return fields


# -- msgpack --------------------------------------------------------------------------------------------

_packb = msgpack.Packer(use_bin_type=True).pack


def encode_msgpack_header(cmd: RemotingCommand) -> bytes:
    header = [cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields]
    return _packb(header)  # type: ignore[no-any-return]


_unpackb = msgpack.unpackb


def decode_msgpack_header(data: bytes) -> RemotingCommand:
    try:
        header = _unpackb(data, raw=False, use_list=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise ProtocolError(f"undecodable msgpack header: {exc}") from None
    if type(header) is not tuple or len(header) != 7:
        raise ProtocolError("msgpack header must be a 7-element array")
    code, language, version, opaque, flag, remark, ext = header
    if type(code) is int and type(language) is int and type(version) is int and type(opaque) is int \
            and type(flag) is int and (remark is None or type(remark) is str):
        # The hot path: what our own SDK and servers write. Anything else gets the checked path below.
        return RemotingCommand(code, opaque=opaque, flag=flag, remark=remark, ext_fields=_coerce_ext_fields(ext),
                               language=language, version=version, serialize_type=SerializeType.MSGPACK)
    fields = {"code": code, "language": language, "version": version, "opaque": opaque, "flag": flag}
    return RemotingCommand(
        _int_field(fields, "code"),
        opaque=_int_field(fields, "opaque"),
        flag=_int_field(fields, "flag"),
        remark=_remark(remark),
        ext_fields=_coerce_ext_fields(ext),
        language=_language(language),
        version=_int_field(fields, "version"),
        serialize_type=SerializeType.MSGPACK,
    )


# -- dispatch -------------------------------------------------------------------------------------------

ENCODERS = {
    SerializeType.JSON: encode_json_header,
    SerializeType.ROCKETMQ: encode_rocketmq_header,
    SerializeType.MSGPACK: encode_msgpack_header,
}
DECODERS = {
    SerializeType.JSON: decode_json_header,
    SerializeType.ROCKETMQ: decode_rocketmq_header,
    SerializeType.MSGPACK: decode_msgpack_header,
}


def encode_header(cmd: RemotingCommand) -> bytes:
    try:
        encoder = ENCODERS[cmd.serialize_type]  # type: ignore[index]
    except KeyError:
        raise ProtocolError(f"unknown serialize type {cmd.serialize_type}") from None
    return encoder(cmd)


def decode_header(serialize_type: int, data: bytes) -> RemotingCommand:
    try:
        decoder = DECODERS[serialize_type]  # type: ignore[index]
    except KeyError:
        raise ProtocolError(f"unknown serialize type {serialize_type}") from None
    return decoder(data)
