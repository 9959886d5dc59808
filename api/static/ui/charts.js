// Minimal canvas charts (no library): a line chart over time and a bar chart.
// Each chart records how many data points it drew in the canvas's data-points attribute
// (a bar chart also its values in data-values), for people and tests reading the page.
"use strict";

const Charts = (() => {
  const PAD = { left: 48, right: 10, top: 10, bottom: 22 };

  const TICKS = 4;  // intervals on the y axis

  // The y axis: 0 up to TICKS steps of a round step (1, 2 or 5 times a power of ten) that
  // reaches maxValue. A count's step is a whole number, so its ticks are integers (a count
  // of 1 read 0 / 0.3 / 0.5 / 0.8 / 1).
  function yScale(maxValue, integer) {
    const rough = maxValue > 0 ? maxValue / TICKS : 1 / TICKS;
    const power = Math.pow(10, Math.floor(Math.log10(rough)));
    let step = 10 * power;
    for (const m of [1, 2, 5]) if (m * power >= rough) { step = m * power; break; }
    if (integer) step = Math.max(1, Math.round(step));
    return { yMax: step * TICKS, step };
  }

  // a tick's label, with as many decimals as its step has (0.25 steps: 0.25, 0.50, ...)
  function tickLabel(value, step) {
    if (value >= 1e3) return formatNumber(value).replace(".0", "");
    const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
    return value.toFixed(step >= 1 ? 0 : decimals);
  }

  function frame(canvas, scale, xLabels) {
    const ctx = canvas.getContext("2d");
    const w = canvas.width, h = canvas.height;
    ctx.clearRect(0, 0, w, h);
    ctx.font = "11px system-ui, sans-serif";
    ctx.strokeStyle = "#e4e7eb";
    ctx.fillStyle = "#6b7580";
    const ticks = [];
    for (let i = 0; i <= TICKS; i++) {
      const y = PAD.top + (h - PAD.top - PAD.bottom) * (1 - i / TICKS);
      ctx.beginPath(); ctx.moveTo(PAD.left, y); ctx.lineTo(w - PAD.right, y); ctx.stroke();
      ticks.push(tickLabel(scale.step * i, scale.step));
      ctx.fillText(ticks[i], 4, y + 4);
    }
    canvas.dataset.ticks = JSON.stringify(ticks);  // for people and tests reading the page
    xLabels.forEach(([x, text]) => ctx.fillText(text, x - 12, h - 6));
    return ctx;
  }

  function formatNumber(v) {
    if (v >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (v >= 1e3) return (v / 1e3).toFixed(1) + "k";
    return Number.isInteger(v) || v >= 100 ? v.toFixed(0) : v.toFixed(1);
  }

  // series: [{values: [[t_ms, y|null], ...], color}]; the x axis spans windowMs up to now.
  function line(canvas, series, windowMs, nowMs) {
    const w = canvas.width, h = canvas.height;
    const all = series.flatMap(s => s.values.map(v => v[1]).filter(v => v !== null));
    const scale = yScale(Math.max(0, ...all), false);
    const yMax = scale.yMax;
    const x = t => PAD.left + (w - PAD.left - PAD.right) * (1 - (nowMs - t) / windowMs);
    const y = v => PAD.top + (h - PAD.top - PAD.bottom) * (1 - v / yMax);
    const labels = [];
    for (let i = 4; i >= 0; i--) {
      const ago = windowMs * i / 4;
      const text = ago >= 120000 ? `-${Math.round(ago / 60000)}m` : `-${Math.round(ago / 1000)}s`;
      labels.push([x(nowMs - ago), i ? text : "now"]);
    }
    const ctx = frame(canvas, scale, labels);
    let points = 0;
    for (const s of series) {
      ctx.strokeStyle = s.color; ctx.fillStyle = s.color; ctx.lineWidth = 2;
      let run = [];  // consecutive points with a value, drawn as one line
      for (const [t, v] of s.values) {
        if (v === null || t < nowMs - windowMs) { points += stroke(ctx, run); run = []; continue; }
        run.push([x(t), y(v)]);
      }
      points += stroke(ctx, run);
    }
    canvas.dataset.points = String(points);
  }

  // A run of one point (a lateness between two idle scrapes: a few deliveries a minute)
  // is a dot; a path of a single moveTo draws nothing, and the chart stayed empty.
  function stroke(ctx, run) {
    ctx.beginPath();
    if (run.length === 1) {
      ctx.arc(run[0][0], run[0][1], 3, 0, 2 * Math.PI);
      ctx.fill();
    } else if (run.length > 1) {
      ctx.moveTo(run[0][0], run[0][1]);
      for (const [px, py] of run.slice(1)) ctx.lineTo(px, py);
      ctx.stroke();
    }
    return run.length;
  }

  // bars of counts: [[label, value], ...]
  function bars(canvas, data, color) {
    const w = canvas.width, h = canvas.height;
    const scale = yScale(Math.max(0, ...data.map(d => d[1])), true);
    const yMax = scale.yMax;
    const slot = (w - PAD.left - PAD.right) / data.length;
    const labels = data.map(([label], i) => [PAD.left + slot * (i + 0.5), label]);
    const ctx = frame(canvas, scale, labels);
    ctx.fillStyle = color;
    data.forEach(([, v], i) => {
      const top = PAD.top + (h - PAD.top - PAD.bottom) * (1 - v / yMax);
      ctx.fillRect(PAD.left + slot * i + slot * 0.15, top, slot * 0.7, h - PAD.bottom - top);
    });
    canvas.dataset.points = String(data.filter(d => d[1] > 0).length);
    canvas.dataset.values = JSON.stringify(data.map(d => d[1]));
  }

  return { line, bars, formatNumber };
})();
