/// The dashboard's three files (`DashboardRoutes`), written by hand: a page, its script and its
/// style. The script asks for an API key (scope `books:read`, and `accounts:read` for the
/// account search), keeps it in the tab's `sessionStorage` only, and reads `GET /v1/books` and
/// `GET /v1/accounts/{account}?timeline=true`. Every value the ledger answers is put in the page
/// as text (`textContent`), never as markup. Each figure carries its exact value in a `data-`
/// attribute, so a test reads the page as a person sees it and checks it against the API.
enum DashboardAssets {
    static let html = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>PurchaseLedger — the books</title>
        <link rel="stylesheet" href="dashboard/dashboard.css">
        <script src="dashboard/dashboard.js" defer></script>
        </head>
        <body>
        <header>
          <h1>PurchaseLedger</h1>
          <p class="note">Estimates from the prices Apple signs, not App Store Connect's reports.</p>
        </header>
        <form id="key-form" autocomplete="off">
          <label for="key">API key (books:read; accounts:read to search accounts)</label>
          <input id="key" type="password" autocomplete="off" spellcheck="false">
          <button type="submit">Open</button>
          <button type="button" id="forget-key">Forget the key</button>
          <span id="key-state" class="note"></span>
        </form>
        <p class="note">The key stays in this tab (its session storage): closing the tab forgets it, though a browser
          that restores sessions may keep it on disk until then.</p>
        <section id="controls" hidden>
          <label>Months <select id="months-count"><option>6</option><option selected>12</option><option>24</option></select></label>
          <label>Environment <select id="environment"><option>Production</option><option>Sandbox</option></select></label>
          <span id="status" class="note"></span>
        </section>
        <section id="summary" hidden>
          <div class="card"><h2>MRR</h2><div id="mrr"></div><div id="mrr-apart" class="note"></div></div>
          <div class="card"><h2>Active subscriptions</h2><div id="active" class="big"></div>
            <div class="note"><span id="paid"></span> paid, <span id="in-trial"></span> in trial</div></div>
          <div class="card"><h2>Deferred revenue</h2><div id="deferred"></div></div>
        </section>
        <section id="series" hidden>
          <h2>MRR and active subscriptions at the start of each month (each line on its own scale)</h2>
          <div id="chart"></div>
        </section>
        <section id="money" hidden>
          <h2>Sales, refunds and net by month (UTC; the last month to date)</h2>
          <table id="months"><thead><tr><th>month</th><th>currency</th><th>sales</th><th>refunds</th><th>net</th>
            <th>proceeds</th><th>recognised</th><th></th></tr></thead><tbody></tbody></table>
        </section>
        <section id="accounts" hidden>
          <h2>An account's timeline</h2>
          <form id="account-form" autocomplete="off">
            <input id="account" placeholder="account id" spellcheck="false">
            <button type="submit">Show</button>
            <span id="account-state" class="note"></span>
          </form>
          <div id="timeline"></div>
        </section>
        </body>
        </html>
        """#

    static let style = #"""
        body { font: 15px/1.4 system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; padding: 0 1rem; color: #1d1d1f; }
        h1 { margin: 0; } h2 { font-size: 1rem; margin: 1.5rem 0 .5rem; }
        .note { color: #6e6e73; font-size: .85rem; }
        form { margin: 1rem 0; display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
        input { padding: .3rem .5rem; min-width: 18rem; }
        #summary { display: flex; gap: 1rem; flex-wrap: wrap; }
        #summary[hidden], section[hidden] { display: none; }
        .card { border: 1px solid #d2d2d7; border-radius: 8px; padding: .75rem 1rem; min-width: 14rem; }
        .card h2 { margin: 0 0 .25rem; font-size: .85rem; color: #6e6e73; }
        .big { font-size: 1.8rem; font-weight: 600; }
        table { border-collapse: collapse; width: 100%; }
        th, td { padding: .25rem .5rem; text-align: right; border-bottom: 1px solid #e5e5ea; font-variant-numeric: tabular-nums; }
        th:first-child, td:first-child, th:nth-child(2), td:nth-child(2) { text-align: left; }
        .bar { display: inline-block; height: .7rem; background: #0a84ff; border-radius: 2px; }
        .negative { color: #c0392b; }
        svg text { font-size: 11px; fill: #6e6e73; }
        .product { margin: .5rem 0; }
        .track { position: relative; height: 1.1rem; background: #f2f2f7; border-radius: 3px; }
        .interval { position: absolute; top: 0; height: 100%; background: #34c759; border-radius: 3px; }
        .interval.gracePeriod { background: #ff9f0a; }
        """#

    static let script = #"""
        'use strict';
        (function () {
          const $ = (id) => document.getElementById(id);
          let key = sessionStorage.getItem('purchase-ledger-key') || '';

          function text(tag, value, className) {
            const node = document.createElement(tag);
            node.textContent = value;
            if (className) node.className = className;
            return node;
          }

          // Milliunits as units with at least two decimals, from the exact integer (no float).
          function amount(milliunits) {
            const value = BigInt(milliunits);
            const negative = value < 0n;
            const magnitude = negative ? -value : value;
            let fraction = (magnitude % 1000n).toString().padStart(3, '0');
            if (fraction.endsWith('0')) fraction = fraction.slice(0, 2);
            return (negative ? '-' : '') + (magnitude / 1000n).toString() + '.' + fraction;
          }

          function money(milliunits, currency) {
            const node = text('span', (currency ? currency + ' ' : '') + amount(milliunits), BigInt(milliunits) < 0n ? 'negative' : '');
            node.dataset.milliunits = String(milliunits);
            if (currency) node.dataset.currency = currency;
            return node;
          }

          // An expensive read (the books, a timeline) answered 503 busy waits its turn: one key's
          // take all the server's slots but one, and this page asks for two at once.
          async function api(path, signal) {
            let response, body;
            for (let attempt = 0; ; attempt++) {
              response = await fetch(path, { signal, headers: { Authorization: 'Bearer ' + key }, cache: 'no-store' });
              body = await response.text();
              if (response.status !== 503 || attempt >= 60) break;
              let code = '';
              try { code = JSON.parse(body).error; } catch (e) { /* not JSON */ }
              if (code !== 'busy') break;
              const seconds = Number(response.headers.get('Retry-After')) || 1;
              await new Promise((resume, stop) => {
                const timer = setTimeout(resume, seconds * 1000);
                signal?.addEventListener('abort', () => { clearTimeout(timer); stop(signal.reason); }, { once: true });
              });
            }
            if (!response.ok) {
              let message = response.status + '';
              try { message += ' ' + JSON.parse(body).message; } catch (e) { /* not JSON */ }
              throw new Error(message);
            }
            return JSON.parse(body, (name, value, context) =>
              typeof value === 'number' && context && !Number.isSafeInteger(value) ? context.source : value);
          }

          function monthStart(date, offset) {
            return new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + offset, 1)).toISOString().replace('.000Z', 'Z');
          }

          let controller = new AbortController();
          let generation = 0;

          // Hides what was shown, so that figures of another query or key never stay under new choices.
          function clear() {
            for (const id of ['summary', 'series', 'money']) $(id).hidden = true;
            $('months').tBodies[0].replaceChildren();
            delete $('months').dataset.query;
          }

          async function load() {
            controller.abort();
            controller = new AbortController();
            const mine = ++generation;
            clear();
            const months = Number($('months-count').value);
            const now = new Date();
            const query = new URLSearchParams({
              from: monthStart(now, 1 - months), to: monthStart(now, 1), by: 'month',
              at: now.toISOString(), environment: $('environment').value,
            }).toString();
            $('status').textContent = 'loading…';
            try {
              const books = await api('v1/books?' + query, controller.signal);
              if (mine !== generation || !key) return;
              show(books, query);
              $('status').textContent = 'as known at position ' + books.position;
            } catch (error) {
              if (mine !== generation) return;
              clear();
              $('status').textContent = 'the books could not be read: ' + error.message;
            }
          }

          function fill(container, amounts) {
            container.replaceChildren();
            const currencies = Object.keys(amounts).sort();
            if (currencies.length === 0) container.append(text('div', '—', 'big'));
            for (const currency of currencies) {
              const line = document.createElement('div');
              line.className = 'big';
              line.append(money(amounts[currency], currency));
              container.append(line);
            }
          }

          function show(books, query) {
            for (const id of ['summary', 'series', 'money', 'accounts']) $(id).hidden = false;
            fill($('mrr'), books.at.mrr);
            const apart = [];
            const unnormalised = Object.keys(books.at.mrrUnnormalised);
            if (unnormalised.length) apart.push('not in MRR: subscriptions of products without a period in the catalog (' + unnormalised.sort().join(', ') + ')');
            if (books.at.unpriced) apart.push(books.at.unpriced + ' without a price');
            $('mrr-apart').textContent = apart.join('; ');
            fill($('deferred'), books.at.deferred);
            $('active').textContent = books.at.active;
            $('paid').textContent = books.at.paid;
            $('in-trial').textContent = books.at.inTrial;
            const table = $('months');
            table.dataset.query = query;
            table.dataset.position = books.position;
            const body = table.tBodies[0];
            body.replaceChildren();
            // Bars on one scale per currency: a yen is not a dollar.
            const widest = {};
            for (const period of books.periods) {
              for (const [currency, figures] of Object.entries(period.byCurrency)) {
                if (BigInt(figures.sales) > (widest[currency] || 0n)) widest[currency] = BigInt(figures.sales);
              }
            }
            for (const period of books.periods) {
              for (const currency of Object.keys(period.byCurrency).sort()) {
                const figures = period.byCurrency[currency];
                const row = document.createElement('tr');
                row.dataset.from = period.from;
                row.dataset.currency = currency;
                const last = period === books.periods[books.periods.length - 1];
                row.append(text('td', period.from.slice(0, 7) + (last ? ' (to date)' : '')), text('td', currency));
                for (const name of ['sales', 'refunds', 'net', 'proceeds', 'recognised']) {
                  const cell = document.createElement('td');
                  cell.dataset.figure = name;
                  cell.append(money(figures[name]));
                  row.append(cell);
                }
                const barCell = document.createElement('td');
                const bar = document.createElement('span');
                bar.className = 'bar';
                const sales = BigInt(figures.sales);
                const top = widest[currency] || 0n;
                bar.style.width = top > 0n && sales > 0n ? Math.max(1, Number((sales * 160n) / top)) + 'px' : '0';
                barCell.append(bar);
                row.append(barCell);
                body.append(row);
              }
            }
            chart(books);
          }

          // MRR (of the currency with the most) and active subscriptions at each month's start, then now.
          function chart(books) {
            const points = books.periods.map((period) => ({ label: period.from.slice(0, 7), at: period.atStart }));
            points.push({ label: 'now', at: books.at });
            // The currency with MRR at the most instants (amounts in different currencies do not add).
            const counts = {};
            for (const point of points) for (const currency of Object.keys(point.at.mrr)) counts[currency] = (counts[currency] || 0) + 1;
            const currency = Object.keys(counts).sort((a, b) => counts[b] - counts[a] || (a < b ? -1 : 1))[0];
            const series = [
              { name: currency ? 'MRR ' + currency : 'MRR', color: '#0a84ff', values: points.map((p) => currency ? Number(p.at.mrr[currency] || 0) / 1000 : 0) },
              { name: 'active subscriptions', color: '#34c759', dashed: true, values: points.map((p) => p.at.active) },
            ];
            const [width, height, left, bottom] = [900, 220, 50, 30];
            const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
            svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
            svg.setAttribute('width', '100%');
            const step = points.length > 1 ? (width - left - 20) / (points.length - 1) : 0;
            for (const line of series) {
              const top = Math.max(1, ...line.values);
              const coordinates = line.values.map((value, index) =>
                `${left + index * step},${(height - bottom - (value / top) * (height - bottom - 20)).toFixed(1)}`);
              const path = document.createElementNS(svg.namespaceURI, 'polyline');
              path.dataset.values = line.values.join(' ');
              path.setAttribute('points', coordinates.join(' '));
              path.setAttribute('fill', 'none');
              path.setAttribute('stroke', line.color);
              path.setAttribute('stroke-width', '2');
              if (line.dashed) path.setAttribute('stroke-dasharray', '6 4');
              const title = document.createElementNS(svg.namespaceURI, 'title');
              title.textContent = line.name;
              path.append(title);
              svg.append(path);
            }
            points.forEach((point, index) => {
              const label = document.createElementNS(svg.namespaceURI, 'text');
              label.setAttribute('x', String(left + index * step - 15));
              label.setAttribute('y', String(height - 8));
              label.textContent = point.label;
              svg.append(label);
            });
            const legend = document.createElement('div');
            legend.className = 'note';
            legend.textContent = series.map((line) => line.name + (line.dashed ? ' (green, dashed)' : ' (blue)')).join(', ');
            $('chart').replaceChildren(svg, legend);
          }

          async function showAccount(account) {
            $('account-state').textContent = 'loading…';
            const box = $('timeline');
            box.replaceChildren();
            try {
              const answer = await api('v1/accounts/' + encodeURIComponent(account) + '?timeline=true&environment=' + encodeURIComponent($('environment').value), undefined);
              const timeline = answer.timeline || [];
              $('account-state').textContent = timeline.length ? 'as known at position ' + answer.position : 'owned nothing, at any instant';
              const now = Date.now();
              const instants = timeline.flatMap((p) => p.intervals.flatMap((i) => [i.from, i.until].filter(Boolean).map(Date.parse)));
              const start = Math.min(now, ...instants);
              const end = Math.max(now, ...instants);
              const span = Math.max(1, end - start);
              for (const product of timeline) {
                const row = document.createElement('div');
                row.className = 'product';
                row.dataset.product = product.product;
                row.append(text('div', product.product));
                const track = document.createElement('div');
                track.className = 'track';
                for (const interval of product.intervals) {
                  const from = interval.from ? Date.parse(interval.from) : start;
                  const until = interval.until ? Date.parse(interval.until) : end;
                  const bar = document.createElement('div');
                  bar.className = 'interval ' + (interval.status || '');
                  bar.dataset.from = interval.from || '';
                  bar.dataset.until = interval.until || '';
                  bar.style.left = ((from - start) / span * 100).toFixed(2) + '%';
                  bar.style.width = Math.max(0.5, (until - from) / span * 100).toFixed(2) + '%';
                  bar.title = (interval.from || 'start') + ' (' + interval.fromCause + ') → ' + (interval.until || 'now') + (interval.untilCause ? ' (' + interval.untilCause + ')' : '');
                  track.append(bar);
                }
                row.append(track);
                box.append(row);
              }
            } catch (error) {
              $('account-state').textContent = 'the account could not be read: ' + error.message;
            }
          }

          function opened() {
            $('controls').hidden = !key;
            $('key-state').textContent = key ? 'key kept in this tab only' : '';
            if (key) load();
          }

          document.addEventListener('DOMContentLoaded', () => {
            $('key-form').addEventListener('submit', (event) => {
              event.preventDefault();
              key = $('key').value.trim();
              $('key').value = '';
              sessionStorage.setItem('purchase-ledger-key', key);
              opened();
            });
            $('forget-key').addEventListener('click', () => {
              key = '';
              sessionStorage.removeItem('purchase-ledger-key');
              controller.abort();
              generation += 1;
              clear();
              $('accounts').hidden = true;
              $('timeline').replaceChildren();
              opened();
            });
            $('months-count').addEventListener('change', load);
            $('environment').addEventListener('change', () => {
              load();
              const account = $('account').value.trim();
              if (account && $('timeline').childElementCount) showAccount(account);
            });
            $('account-form').addEventListener('submit', (event) => {
              event.preventDefault();
              const account = $('account').value.trim();
              if (account) showAccount(account);
            });
            opened();
          });
        })();
        """#
}
