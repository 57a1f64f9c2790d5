// PocketMQ console: the little JavaScript the pages need. No inline scripts (the Content-Security-Policy forbids
// them): CSRF header for htmx requests, the live charts (uPlot), the DLQ select-all box.
(function () {
  "use strict";

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  document.addEventListener("htmx:configRequest", function (event) {
    event.detail.headers["X-CSRF-Token"] = csrfToken();
  });

  function chartWidth(el) {
    return Math.max(Math.floor(el.getBoundingClientRect().width) || 600, 300);
  }

  function makeChart(el, series) {
    var opts = {
      width: chartWidth(el), height: 200,
      scales: { x: { time: true } },
      series: [{}].concat(series.map(function (s) { return { label: s.label, stroke: s.color, width: 2 }; })),
      axes: [{}, { size: 60 }],
    };
    var empty = [[]].concat(series.map(function () { return []; }));
    return new window.uPlot(opts, empty, el);
  }

  function markReady() {
    if (!window.__consoleReadyAt) { window.__consoleReadyAt = performance.now(); }  // read by rmq-bench console
    document.body.setAttribute("data-ready", "1");
  }

  function dashboardCharts() {
    var box = document.getElementById("charts");
    if (!box || !window.uPlot) { return false; }
    var url = box.getAttribute("data-series-url");
    var tps = makeChart(document.getElementById("chart-tps"),
      [{ label: "put TPS", color: "#1f6feb" }, { label: "get TPS", color: "#2da44e" }]);
    var lag = makeChart(document.getElementById("chart-lag"), [{ label: "lag", color: "#cf222e" }]);
    function show(d) {
      if (d.t.length > 1) {  // one point has no time scale yet
        tps.setData([d.t, d.put, d.get]);
        lag.setData([d.t, d.lag]);
      }
      markReady();
    }
    function load() {
      fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) {
          if (r.status === 401) { return r.json().then(function (d) { window.location.assign(d.login); return null; }); }
          return r.ok ? r.json() : null;
        })
        .then(function (d) { if (d) { show(d); } })
        .catch(function () { /* the next poll tries again */ });
    }
    show(JSON.parse(box.getAttribute("data-series")));  // the page carries the samples so far: no wait
    window.setInterval(load, 2000);
    return true;
  }

  function groupLagChart() {
    var el = document.getElementById("chart-group-lag");
    if (!el || !window.uPlot) { return false; }
    var chart = makeChart(el, [{ label: "lag", color: "#cf222e" }]);
    var xs = [], ys = [];
    function add() {
      var total = document.getElementById("total-lag");
      if (!total) { return; }
      xs.push(Date.now() / 1000);
      ys.push(Number(total.getAttribute("data-lag")));
      if (xs.length > 300) { xs.shift(); ys.shift(); }
      if (xs.length > 1) { chart.setData([xs.slice(), ys.slice()]); }  // one point has no time scale yet
    }
    add();
    document.body.addEventListener("htmx:afterSwap", function (event) {
      if (event.detail.target && event.detail.target.id === "lag") { add(); }
    });
    return true;
  }

  function selectAll() {
    document.querySelectorAll("input.select-all").forEach(function (box) {
      box.addEventListener("change", function () {
        var table = box.closest("table");
        table.querySelectorAll('tbody input[type="checkbox"]').forEach(function (c) { c.checked = box.checked; });
      });
    });
  }

  function defaultResetTime() {
    var input = document.getElementById("reset-time");
    if (input && !input.value) {
      var d = new Date(Date.now() - 3600 * 1000);
      d.setMinutes(d.getMinutes() - d.getTimezoneOffset());
      input.value = d.toISOString().slice(0, 19);
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    selectAll();
    defaultResetTime();
    var dashboard = dashboardCharts();
    groupLagChart();
    if (!dashboard) { markReady(); }
  });
})();
