// Inflates the inlined plotly.js (gzip + base64 in #haiprof-plotly), runs it, then draws every figure of
// #haiprof-figures into its #fig-KEY element. The run's text only ever arrives as JSON data: it is parsed, never
// evaluated, and plotly sets labels as text. window.haiprofChartsDone is true once every chart is drawn.
(function () {
  'use strict';
  var CONFIG = {responsive: true, displaylogo: false, scrollZoom: false};

  function inflateB64(b64) {   // gzip + base64 -> ArrayBuffer
    var raw = atob(b64), bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Response(stream).arrayBuffer();
  }
  window.haiprofInflateB64 = inflateB64;

  function fail(el, key, e) {
    el.textContent = 'chart ' + key + ' could not be drawn: ' + e;
  }

  function drawAll() {
    var figs = JSON.parse(document.getElementById('haiprof-figures').textContent), jobs = [];
    Object.keys(figs).forEach(function (key) {
      var el = document.getElementById('fig-' + key), fig = figs[key];
      if (!el) return;
      var layout = Object.assign({autosize: true}, fig.layout || {});
      // a responsive plot takes its height from its element on every resize: give the element the figure's
      el.style.height = (layout.height || 450) + 'px';
      var job = window.haiprofSteps && (fig.zoom || fig.shading)
        ? window.haiprofSteps.attach(el, fig, layout, CONFIG)
        : Plotly.newPlot(el, fig.data || [], layout, CONFIG);
      jobs.push(Promise.resolve(job).catch(function (e) { fail(el, key, e); }));
    });
    return Promise.all(jobs);
  }

  // a chart drawn inside a closed <details> had no width: fit it when the details open
  document.addEventListener('toggle', function (e) {
    if (e.target.open && window.Plotly) {
      e.target.querySelectorAll('.js-plotly-plot').forEach(function (el) { Plotly.Plots.resize(el); });
    }
  }, true);

  inflateB64(document.getElementById('haiprof-plotly').textContent.trim()).then(function (buf) {
    var s = document.createElement('script');
    s.textContent = new TextDecoder().decode(buf);   // our vendored plotly.js, never the run's text
    document.head.appendChild(s);
    return drawAll();
  }).catch(function (e) {
    document.querySelectorAll('.chart').forEach(function (el) { fail(el, el.id, e); });
  }).then(function () { window.haiprofChartsDone = true; });
})();
