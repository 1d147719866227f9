// cronjobs dashboard: times relative to now (the exact instant, in the viewer's zone, on
// hover) and a refresh of the page's live part without reloading it. No build step.
(function () {
  "use strict";
  // Times read as on the command line (cronjobs/timefmt.py): "2026-11-25 15:31 CET" in the
  // viewer's zone, and "3 min ago" / "in 2 h" relative to now.
  var units = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function zoneName(date) {
    try {
      var parts = new Intl.DateTimeFormat("en-US", { timeZoneName: "short" }).formatToParts(date);
      for (var i = 0; i < parts.length; i++) {
        if (parts[i].type === "timeZoneName") { return parts[i].value; }
      }
    } catch (error) { /* no Intl: the offset below */ }
    var offset = -date.getTimezoneOffset();
    return (offset < 0 ? "-" : "+") + pad(Math.floor(Math.abs(offset) / 60)) + pad(Math.abs(offset) % 60);
  }

  function stamp(date) {
    return date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate()) + " " +
      pad(date.getHours()) + ":" + pad(date.getMinutes()) + " " + zoneName(date);
  }

  function ago(date) {
    var seconds = (date.getTime() - Date.now()) / 1000;
    var size = Math.abs(seconds);
    if (size < 1) { return "now"; }
    var amount = "";
    for (var i = 0; i < units.length; i++) {
      if (size >= units[i][1]) { amount = Math.floor(size / units[i][1]) + " " + units[i][0]; break; }
    }
    return seconds > 0 ? "in " + amount : amount + " ago";
  }

  function times(root) {
    var found = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < found.length; i++) {
      var el = found[i];
      var date = new Date(el.getAttribute("datetime"));
      if (isNaN(date.getTime())) { continue; }
      el.title = stamp(date) + " (" + ago(date) + ")";
      el.textContent = el.classList.contains("abs") ? stamp(date) : ago(date);
    }
  }

  var busy = false;
  function refresh() {
    var live = document.getElementById("live");
    var note = document.getElementById("refreshed");
    if (!live || busy || document.hidden) { return; }
    var active = document.activeElement;
    if (active && live.contains(active) && active.tagName === "INPUT") { return; }
    busy = true;
    fetch(window.location.href, { headers: { "X-Fragment": "1" }, cache: "no-store",
                                  credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        live.innerHTML = html;  // the server's own escaped HTML
        times(live);
        if (note) { var now = new Date(); note.textContent = "updated " + pad(now.getHours()) + ":" + pad(now.getMinutes()) + ":" + pad(now.getSeconds()); note.classList.remove("stale"); }
      })
      .catch(function (error) {
        if (note) { note.textContent = "not updated: " + error.message; note.classList.add("stale"); }
      })
      .then(function () { busy = false; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    times(document);
    var every = parseInt(document.body.getAttribute("data-refresh"), 10);
    if (every > 0) { window.setInterval(refresh, every * 1000); }
    window.setInterval(function () { times(document); }, 15000);
    document.addEventListener("visibilitychange", function () { if (!document.hidden) { refresh(); } });
  });
})();
