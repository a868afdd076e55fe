"""The queue declarations, merged once: which queues exist and the job options of each.

A queue is declared in ``settings.OPTIMA_QUEUES`` or by an installed app, in its ``queues.py``
(``QUEUES = {"name": {...options}}``) or as its AppConfig attribute ``queues``. The layers, lowest
first::

    conf.JOB_DEFAULTS < settings.OPTIMA_QUEUE_DEFAULTS < the apps' QUEUES[name] < OPTIMA_QUEUES[name]

merged key by key, so an operator tunes a feature's queue in settings without touching its code
(per-enqueue options go on top of all of these, in ``queues.producer.api``). Within one app the
``queues.py`` module wins over the AppConfig attribute, queue by queue. Two apps declaring the same
queue merge in INSTALLED_APPS order; the first names its source.

This module is the only one that imports an app's ``queues.py`` (``app_modules()``: schedules read
their ``SCHEDULES`` from it too) and the only one that merges ``OPTIMA_QUEUES``. It is a leaf: it
imports ``conf`` and ``exceptions`` only, so the registry, the checks and the connection can all
import it. The merged result is cached until a relevant setting changes (``override_settings``
included: Django's ``setting_changed``).
"""

import importlib
import threading
from dataclasses import dataclass, field

from django.apps import apps
from django.core.signals import setting_changed
from django.dispatch import receiver

from queues import conf
from queues.exceptions import UnknownQueue

_lock = threading.Lock()
_declared = None  # name -> QueueConfig, built on first use


@dataclass(frozen=True)
class QueueConfig:
    name: str
    options: dict = field(default_factory=dict)  # resolved: global defaults < queue options
    source: str = "settings"  # "settings", or the label of the app that declared the queue first
    # the name of the Redis server the queue lives on (its "redis" option; queues/connection/servers.py),
    # kept out of ``options``: those are job options, which an enqueue may override, and a server is not one
    server: str = conf.DEFAULT_SERVER

    def __getitem__(self, key):
        return self.options[key]


def app_modules():
    """(app config, module) for every installed app that has a ``queues`` module."""
    found = []
    for app_config in apps.get_app_configs():
        module_name = f"{app_config.name}.queues"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:  # the module exists but itself imports something missing
                raise
            continue
        found.append((app_config, module))
    return found


def app_declarations():
    """(app label, {name: options}) for every installed app that declares queues."""
    modules = {app_config.label: module for app_config, module in app_modules()}
    found = []
    for app_config in apps.get_app_configs():
        decl = {}
        attr = getattr(app_config, "queues", None)
        if isinstance(attr, dict):
            decl.update(attr)
        module_queues = getattr(modules.get(app_config.label), "QUEUES", None)
        if isinstance(module_queues, dict):
            decl.update(module_queues)
        if decl:
            found.append((app_config.label, decl))
    return found


def sources():
    """(where, {name: options}) of every declaration, settings first; ``where`` names it in messages.
    An OPTIMA_QUEUES that is not a dict counts as empty here (``validate()`` reports it)."""
    in_settings = conf.queues_setting()
    found = [("OPTIMA_QUEUES", in_settings if isinstance(in_settings, dict) else {})]
    found += [(f"{label}.queues.QUEUES", decl) for label, decl in app_declarations()]
    return found


def names():
    """Every declared queue name, unvalidated: for checks of other declarations that name queues."""
    return {name for _, decl in sources() for name in decl}


def validate():
    """Every problem of the queue configuration, in a stable order: the settings ``conf.validate()``
    checks, then each declaration. The system checks report exactly these, and ``declared()``
    refuses to build with the first error among them."""
    problems = conf.validate()
    in_settings = conf.queues_setting()
    if not isinstance(in_settings, dict):
        problems.append(
            conf.Problem(
                "queues.E008",
                f"OPTIMA_QUEUES must be a dict of queue name -> options, got {in_settings!r}.",
                "E.g. OPTIMA_QUEUES = {'default': {}, 'orders-sync': {'attempts': 3}}.",
            )
        )
    for where, decl in sources():
        problems.extend(conf.validate_declaration(where, decl))
    return problems


def _build():
    conf.raise_first_error(validate())
    merged = {}  # name -> (options, source)
    for label, decl in app_declarations():
        for name, opts in decl.items():
            merged.setdefault(name, ({}, label))[0].update(opts)
    for name, opts in conf.queues_setting().items():
        merged.setdefault(name, ({}, "settings"))[0].update(opts)
    global_opts = conf.job_defaults()
    result = {}
    for name in sorted(merged):
        opts, source = merged[name]
        server = opts.pop(conf.QUEUE_SERVER_OPTION, conf.DEFAULT_SERVER)
        result[name] = QueueConfig(name=name, options={**global_opts, **opts}, source=source, server=server)
    return result


def declared():
    """{name: QueueConfig} of every declared queue, sorted by name.

    Raises ImproperlyConfigured with the first error of ``validate()`` (the message the system
    check shows) instead of using a broken configuration.
    """
    global _declared
    if _declared is None:
        with _lock:
            if _declared is None:
                _declared = _build()
    return _declared


def reset():
    """Forget the merged declarations; the next ``declared()`` reads settings and apps again."""
    global _declared
    with _lock:
        _declared = None


@receiver(setting_changed)
def _reset_on_setting_change(*, setting, **kwargs):
    # INSTALLED_APPS: override_settings(INSTALLED_APPS=...) adds or removes apps' declarations.
    if setting.startswith(("OPTIMA_", "QUEUE")) or setting == "INSTALLED_APPS":
        reset()


def queue_names() -> list[str]:
    return list(declared())


def on_server(server):
    """The names of the declared queues that live on the Redis server named ``server``, sorted."""
    return [name for name, config in declared().items() if config.server == server]


def get_config(name):
    try:
        return declared()[name]
    except KeyError:
        raise UnknownQueue(name, declared()) from None
