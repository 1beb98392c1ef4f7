"""``ncdump -t``: numbers of a CF time variable as ISO date strings, computed with cftime.

The output format is netcdf-c's ``cdComp2Iso`` (libdispatch/nctime.c): the date,
then only as much of the time of day as is not zero (hour, minutes, seconds,
fractional seconds as ``%lf``). Which variables qualify follows ncdump's
``is_valid_time_unit`` and ``calendar_type`` (ncdump/nctime0.c).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nczarr_conformance.model import Variable

#: ncdump's calendar names → cftime's (gregorian/standard is the mixed Julian/Gregorian one in both).
CALENDARS = {"gregorian": "standard", "standard": "standard", "proleptic_gregorian": "proleptic_gregorian",
             "noleap": "noleap", "no_leap": "noleap", "365_day": "noleap", "allleap": "all_leap",
             "all_leap": "all_leap", "366_day": "all_leap", "360_day": "360_day", "julian": "julian"}
_UNIT = re.compile(r"^(sec|s$|min|mn$|hour|hr$|day|dy$|week|wk$|month|mo$|season|year|yr$)", re.I)


@dataclass(frozen=True)
class TimeInfo:
    units: str
    calendar: str


def time_info(var: Variable) -> TimeInfo | None:
    """The units/calendar of a variable ncdump -t would print as times, or None."""
    units = var.attributes.get("units")
    if units is None or units.type != "char":
        return None
    words = units.value.split()
    if len(words) < 3 or words[1] != "since" or not _UNIT.match(words[0]):
        return None
    calendar = "standard"
    cal = var.attributes.get("calendar")
    if cal is not None and cal.type == "char" and cal.value:
        calendar = CALENDARS.get(cal.value.lower(), "standard")
    info = TimeInfo(units.value, calendar)
    try:
        iso_time(0.0, info, " ")
    except Exception:  # cftime cannot parse these units: ncdump then prints plain numbers too
        return None
    return info


def iso_time(value: float, info: TimeInfo, separator: str) -> str:
    """``cdRel2Iso`` of one value (without the surrounding quotes)."""
    import cftime

    date: Any = cftime.num2date(value, info.units, calendar=info.calendar, only_use_cftime_datetimes=True)
    day = f"{date.year:04d}-{date.month:02d}-{date.day:02d}"
    hour, minute, second, micro = date.hour, date.minute, date.second, date.microsecond
    if micro:
        return f"{day}{separator}{hour:02d}:{minute:02d}:{second + micro / 1e6:f}"
    if second:
        return f"{day}{separator}{hour:02d}:{minute:02d}:{second:02d}"
    if minute:
        return f"{day}{separator}{hour:02d}:{minute:02d}"
    if hour:
        return f"{day}{separator}{hour:02d}"
    return day
