// The page's charts: each <canvas data-chart="NAME"> is drawn by Chart.js (chart.umd.min.js,
// shipped beside this file: no CDN) from the JSON in <script id="icefloe-chart-data">, which
// the server renders (ui/fleet.py). No animation: the charts are read, and a screenshot or a
// test sees them finished at once. Times are epoch milliseconds on a linear axis, so no date
// adapter (a second library) is needed. A chart without data says so in words (the canvas's
// data-empty) instead of drawing empty axes; sizes read as KB, MB, GB (powers of 1024), as the
// jobs' options and the rest of the page write them.
(function () {
  "use strict";
  const source = document.getElementById("icefloe-chart-data");
  if (!source || typeof Chart === "undefined") return;
  const data = JSON.parse(source.textContent);
  const style = getComputedStyle(document.documentElement);
  const colour = (name) => style.getPropertyValue(name).trim();
  const GOOD = colour("--good"), FAIR = colour("--fair"), POOR = colour("--poor");
  const LINK = colour("--link");

  function bytes(value) {
    const units = ["B", "KB", "MB", "GB", "TB", "PB"];
    let n = Math.abs(value), unit = 0;
    while (n >= 1024 && unit < units.length - 1) { n /= 1024; unit += 1; }
    const digits = unit && !Number.isInteger(n) ? n.toFixed(1) : String(n);
    return (value < 0 ? "-" : "") + digits + " " + units[unit];
  }
  // A step of whole binary units (1, 2, 5, 10... MB) for a bytes axis up to `max`: Chart.js's
  // own decimal steps read as 976.6 KB, 1.9 MB...
  function bytesStep(max) {
    let unit = 1;
    while (max / unit >= 1024 && unit < 1024 ** 5) unit *= 1024;
    const steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];
    const nice = steps.find((n) => max / (n * unit) <= 6) || 1000;
    return nice * unit;
  }
  const DAY_MS = 86400000;
  const day = (ms) => new Date(ms).toISOString().slice(0, 10);
  const minute = (ms) => new Date(ms).toISOString().slice(0, 16).replace("T", " ") + " UTC";
  const hour = (ms) => new Date(ms).toISOString().slice(5, 16).replace("T", " ");
  // Dates when the checks span days, else month-day and time (UTC); checks closer together than
  // an hour get an hour of axis around them, not a range of their own.
  function timeAxis(points) {
    const xs = points.map(([x]) => x);
    const low = Math.min(...xs), high = Math.max(...xs);
    const pad = Math.max(0, 3600000 - (high - low)) / 2;
    return {
      type: "linear", min: low - pad, max: high + pad,
      ticks: { maxTicksLimit: 6,
               callback: function (value) { return this.max - this.min >= 2 * DAY_MS ? day(value) : hour(value); } },
    };
  }
  // Whether a chart's data has nothing to draw.
  const empty = {
    bands: (d) => !d.counts.some((n) => n > 0),
    fleet_rewritten: (d) => !d.bytes.some((n) => n > 0),
    rewritten: (d) => !d.bytes.some((n) => n > 0),
    score: (points) => points.length === 0,
    histogram: (buckets) => !buckets.some(([, n]) => n > 0),
    deletes: (points) => points.length === 0,
    manifests: (points) => points.length === 0,
  };
  const common = {
    animation: false,
    responsive: true,
    maintainAspectRatio: false,
    plugins: { legend: { display: false } },
  };
  const byScore = (band) => (band >= 8 ? GOOD : band >= 5 ? FAIR : POOR);

  const builders = {
    // The fleet: how many tables in each score band; a bar opens the list of its tables.
    bands: (d) => ({
      type: "bar",
      data: {
        labels: d.labels,
        datasets: [{ label: "tables", data: d.counts,
                     backgroundColor: d.labels.map((_, i) => byScore(i)) }],
      },
      options: {
        ...common,
        scales: { x: { title: { display: true, text: "health score" } },
                  y: { beginAtZero: true, ticks: { precision: 0 } } },
        onClick: (_event, elements) => {
          if (elements.length) window.location.href = d.links[elements[0].index];
        },
        onHover: (event, elements) => {
          event.native.target.style.cursor = elements.length ? "pointer" : "default";
        },
      },
    }),
    fleet_rewritten: (d) => rewrittenChart(d),
    rewritten: (d) => rewrittenChart(d),
    // One table: its score at each recorded check.
    score: (points) => ({
      type: "line",
      data: { datasets: [{ label: "health score", data: points.map(([x, y]) => ({ x, y })),
                           borderColor: LINK, backgroundColor: LINK, pointRadius: 2 }] },
      options: {
        ...common,
        scales: { x: timeAxis(points), y: { min: 0, max: 100 } },
        plugins: { ...common.plugins,
                   tooltip: { callbacks: { title: (items) => minute(items[0].parsed.x) } } },
      },
    }),
    // One table: how many data files of each size at its latest check.
    histogram: (buckets) => {
      const labels = buckets.map(([bound], i) =>
        bound === null ? "> " + bytes(buckets[i - 1] ? buckets[i - 1][0] : 0) : "≤ " + bytes(bound));
      return {
        type: "bar",
        data: { labels, datasets: [{ label: "data files", data: buckets.map(([, n]) => n),
                                     backgroundColor: LINK }] },
        options: { ...common, scales: { x: { title: { display: true, text: "file size" } },
                                        y: { beginAtZero: true, ticks: { precision: 0 } } } },
      };
    },
    // One table: delete files (left axis) and the records they delete (right axis).
    deletes: (points) => ({
      type: "line",
      data: { datasets: [
        { label: "delete files", data: points.map(([x, files]) => ({ x, y: files })),
          borderColor: POOR, backgroundColor: POOR, pointRadius: 2, yAxisID: "y" },
        { label: "delete records", data: points.map(([x, , records]) => ({ x, y: records })),
          borderColor: "rgba(97, 110, 124, 0.5)", backgroundColor: "rgba(97, 110, 124, 0.15)",
          fill: true, pointRadius: 0, yAxisID: "records" },
      ] },
      options: {
        ...common,
        spanGaps: true,
        scales: {
          x: timeAxis(points),
          y: { beginAtZero: true, ticks: { precision: 0 },
               title: { display: true, text: "files" } },
          records: { position: "right", beginAtZero: true, grid: { drawOnChartArea: false },
                     title: { display: true, text: "records" } },
        },
        plugins: { legend: { display: true, position: "bottom" },
                   tooltip: { callbacks: { title: (items) => minute(items[0].parsed.x) } } },
      },
    }),
    // One table: the manifests every scan's planning opens (data, deletes) and the small ones
    // a manifest rewrite would merge.
    manifests: (points) => ({
      type: "line",
      data: { datasets: [
        { label: "data manifests", data: points.map(([x, data]) => ({ x, y: data })),
          borderColor: LINK, backgroundColor: LINK, pointRadius: 2 },
        { label: "delete manifests", data: points.map(([x, , deletes]) => ({ x, y: deletes })),
          borderColor: POOR, backgroundColor: POOR, pointRadius: 2 },
        { label: "small manifests", data: points.map(([x, , , small]) => ({ x, y: small })),
          borderColor: "rgba(97, 110, 124, 0.5)", backgroundColor: "rgba(97, 110, 124, 0.15)",
          fill: true, pointRadius: 2 },
      ] },
      options: {
        ...common,
        spanGaps: true,
        scales: { x: timeAxis(points),
                  y: { beginAtZero: true, ticks: { precision: 0 },
                       title: { display: true, text: "manifests" } } },
        plugins: { legend: { display: true, position: "bottom" },
                   tooltip: { callbacks: { title: (items) => minute(items[0].parsed.x) } } },
      },
    }),
  };

  function rewrittenChart(d) {
    return {
      type: "bar",
      data: { labels: d.days, datasets: [{ label: "bytes rewritten", data: d.bytes,
                                          backgroundColor: GOOD }] },
      options: {
        ...common,
        scales: { x: { ticks: { maxTicksLimit: 8 } },
                  y: { beginAtZero: true,
                       ticks: { stepSize: bytesStep(Math.max(1, ...d.bytes)),
                                callback: (value) => bytes(value) } } },
        plugins: { ...common.plugins,
                   tooltip: { callbacks: { label: (item) => bytes(item.parsed.y) } } },
      },
    };
  }

  document.querySelectorAll("canvas[data-chart]").forEach((canvas) => {
    const name = canvas.dataset.chart;
    if (!(name in data) || !(name in builders)) return;
    if (empty[name](data[name])) {
      const note = document.createElement("div");
      note.className = "empty";
      note.dataset.empty = name;
      note.textContent = canvas.dataset.empty || "Nothing recorded yet.";
      canvas.replaceWith(note);
      return;
    }
    new Chart(canvas, builders[name](data[name]));
  });
})();
