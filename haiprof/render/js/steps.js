// The step chart: warm-up and traced-step shading at least a few pixels wide at any zoom, and, on a long run,
// re-bucketing of the visible range from the embedded per-step detail (render/step_detail.py's layout) on every
// zoom or range-slider move: at most MAXB bars, single steps with their phases once few enough are visible.
(function () {
  'use strict';
  var MAXB = 2000, MIN_PX_SHARE = 1 / 250, NOTE_CHAR = 0.011;
  var charts = {};

  function decode(z, buf) {
    var u8 = new Uint8Array(buf), n = z.units, off = 0;
    function planes(width) {
      var out = new Float64Array(n);
      for (var b = 0; b < width; b++) {
        var mul = Math.pow(256, b);
        for (var i = 0; i < n; i++) out[i] += u8[off + b * n + i] * mul;
      }
      off += width * n;
      return out;
    }
    function times() {
      var c = planes(2), out = new Float64Array(n);
      for (var i = 0; i < n; i++) out[i] = c[i] === 0 ? 0 : Math.pow(2, c[i] / z.R) / 1e6;   // ms
      return out;
    }
    var d = {start: planes(4), count: planes(4), last: null};
    for (var i = 1; i < n; i++) d.start[i] += d.start[i - 1];
    var span = planes(4);
    d.last = new Float64Array(n);
    for (i = 0; i < n; i++) d.last[i] = d.start[i] + span[i];
    if (z.k === 1) { d.mean = times(); d.min = d.med = d.max = d.mean; }
    else { d.mean = times(); d.min = times(); d.med = times(); d.max = times(); }
    d.share = z.phases.map(function () { var s = u8.subarray(off, off + n); off += n; return s; });
    return d;
  }

  function lowerBound(arr, v) {   // first i with arr[i] >= v
    var lo = 0, hi = arr.length;
    while (lo < hi) { var m = (lo + hi) >> 1; if (arr[m] < v) lo = m + 1; else hi = m; }
    return lo;
  }

  function median(vals) {
    vals.sort(function (a, b) { return a - b; });
    var m = vals.length >> 1;
    return vals.length % 2 ? vals[m] : (vals[m - 1] + vals[m]) / 2;
  }

  // Bars for the units of the embedded detail inside [lo, hi], grouped so that at most MAXB are drawn.
  function rebucket(c, lo, hi) {
    var d = c.detail, z = c.fig.zoom, a = lowerBound(d.last, lo), b = lowerBound(d.start, hi + 1e-9);
    var m = Math.max(0, b - a), g = Math.max(1, Math.ceil(m / MAXB)), single = z.k === 1 && g === 1;
    var xs = [], width = [], span = [], med = [], mn = [], mx = [], ys = z.phases.map(function () { return []; });
    for (var i = a; i < b; i += g) {
      var j = Math.min(b, i + g), cnt = 0, sum = 0, lo_ = Infinity, hi_ = -Infinity, meds = [];
      var ph = z.phases.map(function () { return 0; });
      for (var u = i; u < j; u++) {
        cnt += d.count[u]; sum += d.mean[u] * d.count[u];
        lo_ = Math.min(lo_, d.min[u]); hi_ = Math.max(hi_, d.max[u]); meds.push(d.med[u]);
        for (var p = 0; p < ph.length; p++) ph[p] += d.share[p][u] / z.S * d.mean[u] * d.count[u];
      }
      var first = d.start[i], last = d.last[j - 1];
      xs.push(single ? first : (first + last) / 2); width.push(single ? 0.8 : last - first + 1);
      span.push([first, last, lo_, hi_]); med.push(median(meds)); mn.push(lo_); mx.push(hi_);
      for (p = 0; p < ph.length; p++) ys[p].push(ph[p] / cnt);
    }
    var where = single ? 'step %{x:d}<br>' : 'steps %{customdata[0]:d}-%{customdata[1]:d}<br>';
    var traces = z.phases.map(function (p, q) {
      return {type: 'bar', name: p.name, x: xs, y: ys[q], width: width, customdata: span,
              marker: {color: p.color}, hovertemplate: where + p.name + ': %{y:.3g} ms' + (single ? '' : ' (mean)') +
              '<extra></extra>'};
    });
    if (!single) {
      traces.push({type: 'scatter', mode: 'markers', name: 'median step, min-max whisker', x: xs, y: med,
        customdata: span, marker: {color: '#222', size: 3},
        error_y: {type: 'data', symmetric: false, color: '#555', thickness: 1, width: 0,
                  array: med.map(function (v, q) { return mx[q] - v; }),
                  arrayminus: med.map(function (v, q) { return v - mn[q]; })},
        hovertemplate: where + 'median %{y:.3g} ms<br>min %{customdata[2]:.3g} ms, max %{customdata[3]:.3g} ms' +
                       '<extra></extra>'});
    }
    var steps = g * z.k;
    c.label = single ? 'every step' : (steps + ' steps a bar' + (z.k > 1 && g === 1 ? ' (the finest embedded)' : ''));
    return traces;
  }

  // Shaded ranges [first, last] as rectangles no narrower than a fraction of the visible range.
  function shading(c, lo, hi) {
    var sh = c.fig.shading || {}, w = (hi - lo) * MIN_PX_SHARE, shapes = [], notes = [];
    function rect(a, b, color, opacity, text, line) {
      var x0 = a - 0.5, x1 = b + 0.5;
      if (x1 < lo || x0 > hi) return;
      if (x1 - x0 < w) { var mid = (x0 + x1) / 2; x0 = mid - w / 2; x1 = mid + w / 2; }
      shapes.push({type: 'rect', xref: 'x', yref: 'paper', x0: x0, x1: x1, y0: 0, y1: 1, fillcolor: color,
                   opacity: opacity, line: line || {width: 0}, layer: 'below'});
      if (text && notes.length < 8) notes.push({x: (x0 + x1) / 2, y: 1, yref: 'paper', yanchor: 'bottom',
                                                 text: text, showarrow: false, font: {size: 10, color: '#666'}});
    }
    if (sh.warmup) rect(sh.warmup[0], sh.warmup[1], '#999', 0.25, 'warm-up');
    var traced = (sh.traced || []).filter(function (r) { return r[1] >= lo - 0.5 && r[0] <= hi + 0.5; });
    traced.forEach(function (r) { rect(r[0], r[1], '#f58518', 0.3, traced.length <= 6 ? 'traced' : ''); });
    if (c.highlight !== null) {
      rect(c.highlight, c.highlight, 'rgba(0,0,0,0)', 1, 'step ' + c.highlight, {color: '#b00', width: 2});
    }
    return {shapes: shapes, notes: apart(notes, hi - lo)};
  }

  // The highest stack of bars drawn (the bars of one x stack: barmode 'stack').
  function barTop(data) {
    var sum = {};
    data.forEach(function (t) {
      if (t.type !== 'bar') return;
      for (var i = 0; i < t.x.length; i++) sum[t.x[i]] = (sum[t.x[i]] || 0) + (t.y[i] || 0);
    });
    return Object.keys(sum).reduce(function (m, x) { return Math.max(m, sum[x]); }, 0);
  }

  // Labels whose text would overlap become one ("warm-up, traced" over steps 0 and 3 of a 301-step chart):
  // a character is about NOTE_CHAR of the axis, as render/charts.py's clipped-bar labels assume.
  function apart(notes, span) {
    var out = [];
    notes.slice().sort(function (a, b) { return a.x - b.x; }).forEach(function (n) {
      out.push(Object.assign({}, n, {x0: n.x, x1: n.x}));
      while (out.length > 1) {
        var a = out[out.length - 2], b = out[out.length - 1];
        if (b.x - a.x >= (a.text.length + b.text.length + 2) / 2 * NOTE_CHAR * span) break;
        a.text += ', ' + b.text; a.x1 = b.x1; a.x = (a.x0 + a.x1) / 2;
        out.pop();
      }
    });
    return out.map(function (n) { delete n.x0; delete n.x1; return n; });
  }

  function redraw(c, range) {
    var full = c.full, whole = range[0] <= full[0] + 1e-6 && range[1] >= full[1] - 1e-6;
    var base = c.layout, sh = shading(c, range[0], range[1]), layout = Object.assign({}, base), data = c.fig.data;
    layout.xaxis = Object.assign({}, base.xaxis, {range: range.slice(), autorange: false});
    layout.annotations = (base.annotations || []).concat(sh.notes);
    if (c.detail && whole) data = rebucket(c, range[0], range[1]);   // the whole run's buckets
    if (c.detail && !whole) {
      data = rebucket(c, range[0], range[1]);
      data.push(c.overview);
      // the bars set the axis: autoranged, a bucket's min-max whisker (one slow step) flattened the bars
      var top = barTop(data);
      layout.yaxis = Object.assign({}, base.yaxis, top > 0 ? {range: [0, 1.05 * top], autorange: false}
                                                           : {range: null, autorange: true, rangemode: 'tozero'});
      layout.yaxis.title = {text: 'ms (' + c.label + ')'};
      layout.annotations = sh.notes;   // the whole run's clipped-bar labels belong to the whole-run bars
    }
    if (c.detail && c.fig.flight) data.push(c.fig.flight);   // the flight recorder's traced stalls, at any zoom
    layout.shapes = sh.shapes;
    c.busy = true;
    var draw = c.drawn ? Plotly.react : Plotly.newPlot;   // the first draw is a newPlot
    c.drawn = true;
    return draw(c.el, data, layout, c.config).then(function () { c.busy = false; c.el.dataset.range = range.join(','); },
                                                          function (e) { c.busy = false; throw e; });
  }

  function onRelayout(c, ev) {
    if (c.busy) return;
    var r = null;
    if (ev['xaxis.autorange']) r = c.full.slice();
    else if (ev['xaxis.range[0]'] !== undefined) r = [+ev['xaxis.range[0]'], +ev['xaxis.range[1]']];
    else if (ev['xaxis.range']) r = [+ev['xaxis.range'][0], +ev['xaxis.range'][1]];
    if (!r) return;
    clearTimeout(c.timer);   // a slider drag sends many: draw the last
    c.timer = setTimeout(function () { redraw(c, r); }, 30);
  }

  function attach(el, fig, layout, config) {
    var xr = (layout.xaxis || {}).range || [0, 1];
    var c = {el: el, fig: fig, layout: layout, config: config, full: xr.slice(), highlight: null, busy: false,
             detail: null, overview: null};
    charts[el.id] = c;
    var ready = Promise.resolve();
    if (fig.zoom) {
      ready = window.haiprofInflateB64(fig.zoom.b64).then(function (buf) {
        c.detail = decode(fig.zoom, buf);
        // the whole run's medians as a line: the range slider keeps the whole run in view when zoomed in
        var med = rebucket(c, c.full[0], c.full[1]).filter(function (t) { return t.type === 'scatter'; })[0];
        c.overview = {type: 'scatter', mode: 'lines', name: 'median, whole run', x: med ? med.x : [],
                      y: med ? med.y : [], line: {color: '#888', width: 1}, hoverinfo: 'skip'};
      });
    }
    return ready.then(function () { return redraw(c, c.full); }).then(function () {
      el.on('plotly_relayout', function (ev) { onRelayout(c, ev); });
      el.on('plotly_click', openTrace);
      el.dataset.ready = '1';
    });
  }

  // A click on a flight recorder marker opens its trace: the link the slowest-steps table has for that step.
  function openTrace(ev) {
    var p = ((ev && ev.points) || []).filter(function (q) { return q.data.meta === 'flight'; })[0];
    if (!p) return;   // a bar's point: the hover mode hands over every trace's point at that step
    var a = document.createElement('a');
    a.href = p.customdata;
    document.body.appendChild(a);
    a.click();
    a.remove();
  }

  // Zoom a step chart onto one step (the slowest-steps table's links), marked with a red outline.
  function zoomTo(id, step, around) {
    var c = charts[id];
    if (!c) return Promise.resolve();
    around = around || 10;
    c.highlight = step;
    return redraw(c, [step - around - 0.5, step + around + 0.5]);
  }

  document.addEventListener('click', function (e) {
    var a = e.target.closest && e.target.closest('a.zoom-step');
    if (!a) return;
    zoomTo(a.getAttribute('data-chart') || 'fig-steps', parseInt(a.getAttribute('data-step'), 10));
  });

  window.haiprofSteps = {attach: attach, zoomTo: zoomTo, charts: charts};
})();
