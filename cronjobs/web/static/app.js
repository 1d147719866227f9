// cronjobs dashboard: times relative to now (the exact instant, in the viewer's zone, on
// hover) and a refresh of the page's live part without reloading it. No build step.
(function () {
  "use strict";
  var units = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400],
               ["hour", 3600], ["minute", 60], ["second", 1]];
  var relative = window.Intl && Intl.RelativeTimeFormat
    ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;
  var exact = { year: "numeric", month: "short", day: "numeric", hour: "2-digit",
                minute: "2-digit", second: "2-digit", timeZoneName: "short" };
  var short = { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
                timeZoneName: "short" };

  function ago(date) {
    var seconds = (date.getTime() - Date.now()) / 1000;
    for (var i = 0; i < units.length; i++) {
      var size = units[i][1];
      if (Math.abs(seconds) >= size || size === 1) {
        var value = Math.round(seconds / size);
        if (Math.abs(seconds) < 10) { return "just now"; }
        return relative ? relative.format(value, units[i][0])
          : Math.abs(value) + " " + units[i][0] + "(s)" + (value < 0 ? " ago" : " from now");
      }
    }
    return "";
  }

  function times(root) {
    var found = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < found.length; i++) {
      var el = found[i];
      var date = new Date(el.getAttribute("datetime"));
      if (isNaN(date.getTime())) { continue; }
      el.title = date.toLocaleString(undefined, exact);
      el.textContent = el.classList.contains("abs") ? date.toLocaleString(undefined, short)
                                                    : ago(date);
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
        if (note) { note.textContent = "updated " + new Date().toLocaleTimeString(); note.classList.remove("stale"); }
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
