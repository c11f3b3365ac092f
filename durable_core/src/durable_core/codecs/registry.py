"""The codec registry: :class:`Codecs`, values to ``ValueRecord`` parts and back with digests.

See the package docstring of :mod:`durable_core.codecs` for the two calls the runtime makes.
The codec contract, :class:`EncodedValue`, digests and encoding one value with one codec are in
:mod:`durable_core.codecs.values`, importable from here.
"""

from __future__ import annotations

import contextlib
import re
import threading
import typing
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from durable_core._typeforms import (
    InstanceMismatch,
    admits,
    check_instance,
    describe_value,
    format_path,
    is_union,
    normalize,
    type_name,
)
from durable_core._words import a
from durable_core.codecs.canonical import ResolveProblem
from durable_core.codecs.classes import make_converter
from durable_core.codecs.ids import form_of_id
from durable_core.codecs.jsoncodec import JSONCodec, compose_version
from durable_core.codecs.persistable import find_unpersistable
from durable_core.codecs.resolver import (
    Resolver,
    default_class_id,
    is_abstract,
    serves_as_class,
)
from durable_core.codecs.scalars import default_json_codecs
from durable_core.codecs.values import (
    _PLAIN_SCALARS,
    Codec,
    EncodedValue,
    StoredDecoder,
    _class_of,
    _decode_checked,
    _encode_with,
    _serves,
    _subject,
    digest_of,
)
from durable_core.errors import CodecError, ConflictError, CorruptRecordError

if TYPE_CHECKING:
    pass

__all__ = ["Codec", "Codecs", "EncodedValue", "digest_of", "register_builtin_codecs"]

_TOKEN = re.compile(r"\S+")
_DIGEST = re.compile(r"[0-9a-f]{64}")


class Codecs:
    """A registry of codecs keyed by Python type (SPEC C-2).

    ``Codecs()`` starts empty and accepts custom entries; :meth:`default` adds the built-in
    JSON codecs; :meth:`from_plugins` adds what every loaded plugin registers. Iterating yields
    the registered codecs in registration order (codecs built for container forms by
    :meth:`lookup` are not registered and not listed).

    The registry is thread-safe. Register codecs before the runtime uses it: a codec already
    used to write a run must stay registered (same id and version) to resume that run.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._by_type: dict[Any, Any] = {}
        self._by_id: dict[str, Any] = {}
        self._built: dict[Any, Any] = {}
        # Declared types check_declared passed: codecs are only ever added, so they stay passed.
        self._declared_ok: set[Any] = set()
        self._converter = make_converter()

    # --- construction ------------------------------------------------------------------------

    @classmethod
    def default(cls) -> Codecs:
        """A registry with the built-in JSON codecs (C-2): ``bool``, ``int``, ``float``,
        ``str``, ``bytes`` and ``None``; their ``T | None``, ``list``, ``dict[str, …]`` and
        ``tuple`` forms are served by :meth:`lookup`.

        Returns:
            A new registry; add your own codecs to it.
        """
        codecs = cls()
        register_builtin_codecs(codecs)
        return codecs

    @classmethod
    def from_plugins(cls, pm: Any = None) -> Codecs:
        """A registry filled through the ``durable_register_codecs`` hook of every plugin:
        the same as ``pm.codecs()`` (:meth:`DurablePluginManager.codecs
        <durable_core.plugins.manager.DurablePluginManager.codecs>`), which fills it.

        Args:
            pm: the plugin manager; ``None``: the process-wide one,
                :func:`~durable_core.plugins.default_plugins`.

        Returns:
            A new registry.

        Raises:
            ConflictError: two plugins register a codec for the same type or with the same id;
                the message names the plugin.
            CodecError: a plugin registers something that is not a valid codec.
            PluginError: a plugin's hook raised another error.
        """
        if pm is None:
            # The plugin wing sits above the codecs: this documented shortcut alone reaches up.
            from durable_core.plugins.manager import default_plugins

            pm = default_plugins()
        codecs: Codecs = pm.codecs()
        return codecs

    # --- registration ------------------------------------------------------------------------

    def register(self, codec: Any) -> Any:
        """Register a codec under its type and id (C-2).

        Args:
            codec: an object with ``type``, ``id``, ``version``, ``encode`` and ``decode``
                (see :class:`Codec`).

        Returns:
            ``codec``, so the call can wrap a definition.

        Raises:
            CodecError: the codec's type, id or version is empty, the id or version contains
                whitespace, or ``encode``/``decode`` is missing.
            ConflictError: the type or the id is already registered; the first entry is kept.
        """
        cid = getattr(codec, "id", None)
        shown = repr(cid) if cid else repr(codec)
        for attr in ("encode", "decode"):
            if not callable(getattr(codec, attr, None)):
                raise CodecError(
                    f"codec {shown} has no callable {attr}(); a codec needs type, id, version, "
                    "encode(value) -> bytes and decode(bytes) -> value"
                )
        tp = getattr(codec, "type", None)
        if tp is None or tp == "":
            raise CodecError(
                f"codec {shown} has an empty type; set codec.type to the Python type it serves"
            )
        for attr in ("id", "version"):
            text = getattr(codec, attr, None)
            if not isinstance(text, str) or not _TOKEN.fullmatch(text):
                raise CodecError(
                    f"codec {shown} for {type_name(tp)} has an invalid {attr} {text!r}: expected "
                    f"a non-empty string without whitespace (such as 'json:int' / '1')"
                )
        key = normalize(tp)
        if not (isinstance(key, type) or typing.get_origin(key) is not None):
            raise CodecError(
                f"codec {shown} has the type {tp!r}, which is not a class or a type form; set "
                "codec.type to a class such as myapp.Money, or a form such as list[int]"
            )
        with self._lock:
            old = self._by_type.get(key)
            if old is not None:
                raise ConflictError(
                    f"type {type_name(key)} already has the codec {old.id} version {old.version}; "
                    f"the codec {cid} version {codec.version} was not registered (the first "
                    "entry is kept). Register one codec per type"
                )
            old = self._by_id.get(cid)
            if old is not None:
                raise ConflictError(
                    f"codec id {cid!r} is already registered for type {type_name(old.type)}; "
                    f"the codec for {type_name(key)} was not registered (the first entry is "
                    "kept). Give every codec its own id"
                )
            self._by_type[key] = codec
            self._by_id[cid] = codec
            self._built.clear()
        return codec

    def register_json(self, tp: Any, *, id: str | None = None, version: str = "1") -> JSONCodec:
        """Register a JSON codec for an attrs class, a dataclass or an enum (C-4).

        Fields are encoded by their declared types, recursively: scalars, ``bytes``, registered
        types, nested attrs classes/dataclasses/enums (served as part of this codec unless they
        have their own codec), and ``T | None``, ``list[T]``, ``dict[str, T]``, ``tuple[...]``
        of them. Only ``__init__`` fields are stored. Decoding refuses unknown and missing
        fields. Container forms (``list[Invoice]``) need no registration: :meth:`lookup` builds
        them from the class codec.

        Args:
            tp: the class (or a container form of classes) to serve.
            id: the codec id; default ``json:<module>.<qualname>``.
            version: the contract version (default ``"1"``); change it when the class's fields
                change in a way old data does not fit. The stored version also lists the
                versions other than ``"1"`` of codecs the class contains
                (``1+myapp.Address@2``).

        Returns:
            The registered codec.

        Raises:
            CodecError: a field's type cannot be served by JSON (``Any``, ``object``, an
                abstract class, a union of classes, a type without codec); the message names
                the field and says that a custom codec is needed.
            ConflictError: the type or the id is already registered.
        """
        key = normalize(tp)
        resolver = Resolver(self._registered, self._converter, serve_classes=True)
        try:
            with self._lock:
                if serves_as_class(key):
                    codec = resolver.build_class(key, id or default_class_id(key), version)
                elif isinstance(key, type):
                    raise ResolveProblem(
                        f"register_json serves attrs classes, dataclasses, enums and containers "
                        f"of them; {type_name(key)} is none of these: a custom codec is needed "
                        "(see docs/codecs.md)"
                    )
                else:
                    codec = resolver.build(key)
                    if id is not None:
                        codec.id = id
                    codec._base_version = version
                    codec.version = compose_version(version, codec._dep_pins)
        except ResolveProblem as problem:
            head = f"cannot register a JSON codec for {type_name(key)}"
            raise CodecError(_resolve_message(head, problem)) from None
        return self.register(codec)

    # --- lookup ------------------------------------------------------------------------------

    def _registered(self, key: Any) -> Any:
        return self._by_type.get(key)

    def lookup(self, key_type: Any) -> Any:
        """The codec for a declared key type.

        A registered codec is returned as is. For ``T | None`` / ``Optional[T]``, unions of
        types with distinct JSON forms (``int | str``), ``list[T]``, ``dict[str, T]``,
        ``tuple[A, B]``, ``tuple[T, ...]`` a JSON codec is built from the codecs of the parts
        (a non-JSON part, such as a numpy array, is embedded as base64) and cached.

        Args:
            key_type: a declared type; spellings are normalised (``typing.List[int]`` is
                ``list[int]``, ``Annotated`` and ``NewType`` are unwrapped).

        Returns:
            The codec; its ``id``/``version`` are what a value of this exact type stores.

        Raises:
            CodecError: nothing serves the type; the message says which part and what to do
                (register a codec, call ``register_json``, declare element types).
        """
        key = normalize(key_type)
        with self._lock:
            codec = self._by_type.get(key)
            if codec is not None:
                return codec
            codec = self._built.get(key)
            if codec is not None:
                return codec
            resolver = Resolver(self._registered, self._converter, serve_classes=False)
            try:
                codec = resolver.build(key)
            except ResolveProblem as problem:
                head = f"no codec for {type_name(key)}"
                if not problem.where:  # the problem is about the type itself: say it once
                    if problem.problem.startswith(f"no codec is registered for {type_name(key)}:"):
                        raise CodecError(problem.problem) from None
                    named = f"{type_name(key)}: "
                    if problem.problem.startswith(named):
                        problem = ResolveProblem(problem.problem[len(named) :])
                raise CodecError(_resolve_message(head, problem)) from None
            self._built[key] = codec
            return codec

    def check_declared(self, key_type: Any) -> None:
        """Check, before anything runs, that values of a declared key type can be stored.

        Passes when :meth:`lookup` finds a codec for ``key_type``, and for the declared types
        that are broad on purpose, whose values :meth:`encode_value` stores with the codec of
        their actual class: ``object``, ``Any``, a type variable, an abstract class or
        protocol, a class that a registered codec serves a subclass of, and a union of
        classes each of which passes (``Cat | Dog``, ``Animal | None``). Whether a value
        behind such a type can be stored is only known when it is encoded.

        The durable runtime runs this for every value key of a graph (and of its Sub graphs)
        before a run starts or resumes.

        Args:
            key_type: a declared key type.

        Raises:
            CodecError: no codec serves the type (for a union: one of its members); the message
                is :meth:`lookup`'s, saying what to do.
        """
        try:
            if key_type in self._declared_ok:
                return
        except TypeError:  # a type form that cannot be hashed: check it each time
            pass
        self._check_declared(key_type)
        with contextlib.suppress(TypeError):
            self._declared_ok.add(key_type)

    def _check_declared(self, key_type: Any) -> None:
        key = normalize(key_type)
        try:
            self.lookup(key)
            return
        except CodecError as exc:
            problem = exc
        if key is typing.Any or key is object or isinstance(key, typing.TypeVar):
            return
        if is_union(key):
            members = typing.get_args(key)
            if all(isinstance(m, type | typing.TypeVar) or m is typing.Any for m in members):
                for member in members:  # each value is stored with its own class's codec
                    self._check_declared(member)
                return
            raise problem  # a member such as list[int]: only the union's own codec could
        if isinstance(key, type):
            if is_abstract(key):
                return
            with self._lock:
                served = [normalize(codec.type) for codec in self._by_type.values()]
            if any(isinstance(t, type) and t is not key and issubclass(t, key) for t in served):
                return
        raise problem

    def by_id(self, codec_id: str) -> Any:
        """The registered codec with id ``codec_id``.

        Raises:
            CodecError: no registered codec has that id; the message lists the registered ids.
        """
        with self._lock:
            codec = self._by_id.get(codec_id)
            if codec is None:
                known = ", ".join(sorted(self._by_id)) or "none"
                raise CodecError(
                    f"no codec with id {codec_id!r} is registered (registered: {known}); "
                    "install or register the codec that wrote the value"
                )
            return codec

    def by_stored_id(self, codec_id: str) -> Any:
        """The codec that wrote a stored value naming ``codec_id``, without its declared type.

        A registered id gives its codec (as :meth:`by_id`). A container id that no codec is
        registered under (``json:list[int]``, ``json:dict[str,optional[myapp.Cat]]``) is read
        back as its type form and built by :meth:`lookup` from the registered codecs of its
        parts, as it was when the value was written.

        Raises:
            CodecError: no registered codec has the id and it is not a container form of
                registered codecs; the message lists the registered ids.
        """
        try:
            return self.by_id(codec_id)
        except CodecError as missing:
            try:
                form = form_of_id(codec_id, lambda part: self.by_id(part).type)
                codec = self.lookup(form)
            except (ValueError, CodecError):
                raise missing from None
            if codec.id != codec_id:
                raise missing from None
            return codec

    def __iter__(self) -> Iterator[Any]:
        with self._lock:
            return iter(list(self._by_type.values()))

    def __len__(self) -> int:
        return len(self._by_type)

    def __contains__(self, tp: object) -> bool:
        try:
            return normalize(tp) in self._by_type
        except TypeError:
            return False

    def __repr__(self) -> str:
        return f"<Codecs {', '.join(f'{c.id}@{c.version}' for c in self)}>"

    # --- values ------------------------------------------------------------------------------

    def encode_value(self, key_type: Any, value: Any, *, name: str | None = None) -> EncodedValue:
        """Encode a ready value of a key for a ``ValueRecord`` (R-VAL-1, R-VAL-2, C-1, C-3).

        The codec is the one of the value's actual type (R-VAL-1): the declared type's codec
        when the value is exactly of that type; otherwise — a value behind a broader declared
        type such as ``object``, ``Any``, a base class or a union of classes — the registered
        codec of ``type(value)``, after checking that the value is an instance of the declared
        type. ``None`` for an Optional key, ``0``, ``""``, ``b""``, ``[]``, ``{}`` are ready
        values like any other.

        Args:
            key_type: the key's declared type.
            value: the value to store; it is not modified.
            name: the key's name, used in error messages.

        Returns:
            ``EncodedValue(codec_id, version, data, digest)``; ``digest`` is the SHA-256 hex of
            ``data``.

        Raises:
            CodecError: the value (or a part of it, at any depth) can never be persisted — a
                callable, generator, coroutine, lock, open file, socket, module or a reference
                cycle (C-3); it does not fit the declared type; no codec serves it; or the
                codec refuses it (a lone surrogate, NaN/±Infinity, an object dtype …). The
                message names the type, the codec id/version and the path inside the value.
        """
        kind = type(value)
        if key_type is kind and kind in _PLAIN_SCALARS:
            # A plain scalar of exactly its declared type: nothing in it can be unpersistable,
            # the declared type is its own normal form, and its codec is the registered one
            # when that codec serves it (else the general path below finds out what to say).
            codec = self._by_type.get(kind)
            if codec is not None and _serves(codec, value):
                return _encode_with(codec, kind, value, name)
        elif key_type is kind:
            # A value of exactly its declared class, which has a codec of its own: the codec
            # the general path below would look up and pick (a processor's state, each
            # commit). Anything else, or a codec that does not serve the value, goes there.
            codec = self._by_type.get(kind)
            if codec is not None and normalize(kind) is kind and _serves(codec, value):
                bad = find_unpersistable(value)
                if bad is None:
                    return _encode_with(codec, kind, value, name)
        declared = normalize(key_type)
        bad = find_unpersistable(value)
        if bad is not None:
            raise CodecError(
                f"cannot encode {_subject(declared, name)}: at {format_path(bad.path)}: "
                f"{bad.kind} ({describe_value(bad.obj)}) cannot be persisted; {bad.advice}"
            )
        return _encode_with(self._codec_for_value(declared, value, name), declared, value, name)

    def _codec_for_value(self, declared: Any, value: Any, name: str | None) -> Any:
        static = None
        static_problem = ""
        try:
            static = self.lookup(declared)
        except CodecError as exc:
            static_problem = str(exc)
        if static is not None and _serves(static, value):
            return static
        actual = type(value)
        dynamic = None
        dynamic_problem = ""
        if actual is not declared:
            try:
                dynamic = self.lookup(actual)
            except CodecError as exc:
                dynamic_problem = str(exc)
        if dynamic is not None:
            try:
                check_instance(value, declared)
            except InstanceMismatch as exc:
                raise CodecError(
                    f"cannot encode {_subject(declared, name)}: at {format_path(exc.path)}: "
                    f"{exc.problem}"
                ) from None
            return dynamic
        if static is not None and dynamic_problem and isinstance(value, _class_of(declared)):
            raise CodecError(
                f"cannot encode {_subject(declared, name)}: the value is {a(type_name(actual))}, "
                f"a subclass, and a value is stored with the codec of its own class: "
                f"{dynamic_problem}"
            )
        if static is not None:
            if isinstance(static, JSONCodec):
                return static  # its encode names the exact mismatch and path
            raise CodecError(
                f"cannot encode {_subject(declared, name)} with codec {static.id} version "
                f"{static.version}: expected {type_name(static.type)}, found "
                f"{describe_value(value)}"
            )
        detail = static_problem
        if dynamic_problem and self._broad(declared):
            # the declared type has no codec on purpose: only the value's class matters
            detail = (
                f"the value is stored with the codec of its own class, "
                f"{type_name(actual)}: {dynamic_problem}"
            )
        elif dynamic_problem and dynamic_problem not in static_problem:
            detail += f"; and for the value's actual type: {dynamic_problem}"
        raise CodecError(f"cannot encode {_subject(declared, name)}: {detail}")

    def _broad(self, declared: Any) -> bool:
        try:
            self.check_declared(declared)
        except CodecError:
            return False
        return True

    def decode_value(
        self,
        key_type: Any,
        codec_id: str,
        version: str,
        data: bytes,
        digest: str,
        *,
        name: str | None = None,
    ) -> Any:
        """Decode a stored ready value and check it (R-VAL-3, C-1, C-4).

        Checks, in order: the digest's format (64 lowercase hex) and that it equals the
        SHA-256 of ``data``; that the codec id and version are the ones the registry has for
        the declared type (or, for a value stored with the codec of its actual type, that
        that codec is registered and serves a type the declared type admits); then decodes
        and checks that the value is an instance of the declared type.

        Args:
            key_type: the key's declared type.
            codec_id: the stored ``ValueRecord.TypeID``.
            version: the stored ``ValueRecord.Version``.
            data: the stored ``ValueRecord.Data`` (may be empty).
            digest: the stored ``ValueRecord.Digest``.
            name: the key's name, used in error messages.

        Returns:
            The decoded value.

        Raises:
            CorruptRecordError: the digest is malformed or does not match the bytes, or the
                codec id/version is empty: the stored data was lost or damaged.
            CodecError: the codec changed (another id or version than the stored one), no
                registered codec has the stored id, the bytes do not decode (invalid UTF-8,
                trailing content, unknown field, wrong JSON type, ``null`` for a non-Optional
                type …), or the decoded value is not an instance of the declared type.
        """
        declared = normalize(key_type)
        subject = _subject(declared, name)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise CodecError(
                f"cannot decode {subject}: expected the stored bytes, found {type_name(type(data))}"
            )
        data = bytes(data)
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise CorruptRecordError(
                f"cannot decode {subject}: the stored digest {digest!r} is not a SHA-256 hex "
                "digest (64 lowercase hex characters); the record is damaged: keep it as "
                "evidence and restore the run from a copy"
            )
        actual = digest_of(data)
        if actual != digest:
            raise CorruptRecordError(
                f"cannot decode {subject}: the stored data ({len(data)} bytes) has SHA-256 "
                f"{actual}, but the record says {digest}; the data was lost or damaged: keep "
                "the record as evidence and restore the run from a copy"
            )
        for label, text in (("codec id", codec_id), ("codec version", version)):
            if not isinstance(text, str) or not text:
                raise CorruptRecordError(
                    f"cannot decode {subject}: the stored {label} is {text!r}; a ready value "
                    "always names its codec: the record is damaged"
                )
        codec = self._codec_for_stored(declared, codec_id, version, subject)
        return _decode_checked(codec, declared, data, name)

    def stored_decoder(
        self, key_type: Any, codec_id: str, version: str, *, name: str | None = None
    ) -> StoredDecoder:
        """Decode many values stored with one codec for one declared type, digests checked.

        For a caller that has already checked each value's digest against its bytes (as
        :func:`~durable_core.validate_record` does): the returned decoder does every other
        step of :meth:`decode_value` — the codec id and version, decoding, the instance check
        of the declared type — with the codec looked up once.

        Args:
            key_type: the key's declared type.
            codec_id: the stored ``ValueRecord.TypeID`` (non-empty).
            version: the stored ``ValueRecord.Version`` (non-empty).
            name: the key's name, used in the message of a codec that changed.

        Returns:
            A :class:`StoredDecoder`: call it with the stored bytes and the key's name.

        Raises:
            CodecError: as :meth:`decode_value`, when the codec changed or is not registered.
        """
        declared = normalize(key_type)
        codec = self._codec_for_stored(declared, codec_id, version, _subject(declared, name))
        return StoredDecoder(codec, declared)

    def stored_codec(
        self, key_type: Any, codec_id: str, version: str, *, name: str | None = None
    ) -> Any:
        """The codec that decodes a value stored with ``codec_id``/``version`` for ``key_type``.

        The codec :meth:`decode_value` would use; calling its ``decode`` on bytes this registry
        encoded skips the digest and type checks that stored bytes need.

        Raises:
            CodecError: as :meth:`decode_value` when the codec changed or is not registered.
        """
        declared = normalize(key_type)
        return self._codec_for_stored(declared, codec_id, version, _subject(declared, name))

    def _codec_for_stored(self, declared: Any, codec_id: str, version: str, subject: str) -> Any:
        static = None
        static_problem = ""
        try:
            static = self.lookup(declared)
        except CodecError as exc:
            static_problem = str(exc)
        codec = None
        if static is not None and static.id == codec_id:
            codec = static
        else:
            with self._lock:
                by_id = self._by_id.get(codec_id)
            if by_id is not None and admits(declared, normalize(by_id.type)):
                codec = by_id
            elif by_id is not None:
                raise CodecError(
                    f"cannot decode {subject}: it was stored with codec {codec_id} version "
                    f"{version}, which serves {type_name(by_id.type)}, not the declared type "
                    f"{type_name(declared)}: the key's declared type or the codec changed "
                    "since the run was written; resume with the original definition or start "
                    "a new run"
                )
            elif static is not None:
                raise CodecError(
                    f"cannot decode {subject}: it was stored with codec {codec_id} version "
                    f"{version}, but {type_name(declared)} now uses codec {static.id} version "
                    f"{static.version}: the codec changed. Resume with the codec that wrote "
                    "the run registered, or start a new run"
                )
            else:
                raise CodecError(
                    f"cannot decode {subject}: it was stored with codec {codec_id} version "
                    f"{version}, and no registered codec has that id ({static_problem}); "
                    "install or register the codec that wrote the run"
                )
        if codec.version != version:
            raise CodecError(
                f"cannot decode {subject}: it was stored with codec {codec_id} version "
                f"{version}, but the registered codec {codec.id} has version {codec.version}: "
                "the codec changed. Resume with the codec version that wrote the run, or start "
                "a new run"
            )
        return codec


def _resolve_message(head: str, problem: ResolveProblem) -> str:
    where = " in ".join(reversed(problem.where))
    return f"{head}: {where + ': ' if where else ''}{problem.problem}"


def register_builtin_codecs(codecs: Codecs) -> None:
    """Add the built-in JSON codecs to ``codecs`` (C-2): ``json:bool``, ``json:int``,
    ``json:float``, ``json:str``, ``json:bytes`` (standard base64) and ``json:none``, all at
    version ``"1"``.

    Used by :meth:`Codecs.default` and by the core's built-in plugin, so there is one
    definition of the defaults.

    Raises:
        ConflictError: one of these types or ids is already registered in ``codecs``.
    """
    for codec in default_json_codecs():
        codecs.register(codec)
