// Live updates: every `data-every` seconds, fetch this page again and put
// its `#live` region in place of ours, without reloading. Nothing happens
// while the tab is hidden or while focus is inside the region (a form
// being filled in). The server answers such requests (`X-Live: 1`) from
// a copy at most one period old, however many tabs ask.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) {
    return;
  }
  var every = Math.max(1, Number(live.dataset.every) || 5) * 1000;
  function busy() {
    return document.visibilityState !== "visible" ||
      live.contains(document.activeElement);
  }
  function tick() {
    if (busy()) {
      setTimeout(tick, every);
      return;
    }
    fetch(window.location.href, {
      headers: { "X-Live": "1" },
      credentials: "same-origin",
      cache: "no-store"
    }).then(function (response) {
      return response.ok ? response.text() : null;
    }).then(function (text) {
      if (text === null || busy()) {
        return;
      }
      var fresh = new DOMParser().parseFromString(text, "text/html")
        .getElementById("live");
      if (fresh) {
        live.replaceChildren.apply(live, Array.from(fresh.childNodes));
        live.dataset.updated = String(Date.now());
      }
    }).catch(function () {
      // The next period tries again.
    }).then(function () {
      setTimeout(tick, every);
    });
  }
  setTimeout(tick, every);
})();
