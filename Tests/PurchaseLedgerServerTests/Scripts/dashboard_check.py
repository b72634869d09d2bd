"""Reads ledger-server's /dashboard in a real browser (Chromium, headless, driven by Selenium)
as a person would: gives the key, waits for the figures, searches an account. Checks that the
page shows exactly what GET /v1/books and GET /v1/accounts/{account}?timeline=true answer,
and that the key stays in the tab (sessionStorage), not in cookies or localStorage.

usage: dashboard_check.py CHROMIUM CHROMEDRIVER BASE_URL KEY ACCOUNT SCREENSHOT
Exit 0 when every check passes; else prints what differs and exits 1.
"""
import datetime
import json
import sys
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

chromium, chromedriver, base, key, account, screenshot = sys.argv[1:7]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def amount(milliunits):
    """Milliunits as the page writes them: at least two decimals, `-2.495`, `9.99`."""
    value = int(milliunits)
    sign = "-" if value < 0 else ""
    whole, fraction = divmod(abs(value), 1000)
    fraction = f"{fraction:03d}"
    if fraction.endswith("0"):
        fraction = fraction[:2]
    return f"{sign}{whole}.{fraction}"


def month_start(today, offset):
    month = today.year * 12 + today.month - 1 + offset
    return f"{month // 12:04d}-{month % 12 + 1:02d}-01T00:00:00Z"


def api(path):
    request = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + key})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


options = webdriver.ChromeOptions()
options.binary_location = chromium
options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,1400"]:
    options.add_argument(argument)
driver = webdriver.Chrome(service=Service(chromedriver), options=options)
try:
    # Generous: the books are an expensive read, served on the idle class's threads, which a
    # machine running every suite at once leaves waiting; the wait ends once they are shown.
    wait = WebDriverWait(driver, 120)
    driver.get(base + "/dashboard")
    check(driver.find_element(By.ID, "summary").get_attribute("hidden") is not None, "figures shown before a key was given")
    driver.find_element(By.ID, "key").send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "#key-form button[type=submit]").click()
    wait.until(lambda d: d.find_element(By.ID, "months").get_attribute("data-query"))
    table = driver.find_element(By.ID, "months")
    query = table.get_attribute("data-query")
    position = table.get_attribute("data-position")
    books = api("/v1/books?" + query + "&position=" + position)
    # The page asked what a person expects: the last twelve months, by month, in production.
    today = datetime.datetime.now(datetime.timezone.utc)
    asked = urllib.parse.parse_qs(query)
    for name, expected in [("from", month_start(today, -11)), ("to", month_start(today, 1)), ("by", "month"), ("environment", "Production")]:
        check(asked.get(name) == [expected], f"the page asked {name}={asked.get(name)}, not {expected}")
    check(len(books["periods"]) == 12, "not twelve months")

    # Each month and currency: the five figures, exactly.
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    expected_rows = [(p["from"], c) for p in books["periods"] for c in sorted(p["byCurrency"])]
    check([(r.get_attribute("data-from"), r.get_attribute("data-currency")) for r in rows] == expected_rows,
          "the table's rows are not the answer's months and currencies")
    for row in rows:
        period = next(p for p in books["periods"] if p["from"] == row.get_attribute("data-from"))
        figures = period["byCurrency"][row.get_attribute("data-currency")]
        for cell in row.find_elements(By.CSS_SELECTOR, "td[data-figure]"):
            name = cell.get_attribute("data-figure")
            shown = cell.find_element(By.CSS_SELECTOR, "[data-milliunits]").get_attribute("data-milliunits")
            check(shown == str(figures[name]), f"{row.get_attribute('data-from')} {name}: shown {shown}, answered {figures[name]}")
            check(cell.text.strip() == amount(figures[name]), f"{name}: written {cell.text!r}, answered {figures[name]}")
    check(len(rows) >= 3, "fewer rows than the test's months with sales")

    # The figures now: subscriptions, MRR and deferred revenue per currency.
    at = books["at"]
    for element, value in [("active", at["active"]), ("paid", at["paid"]), ("in-trial", at["inTrial"])]:
        shown = driver.find_element(By.ID, element).text.strip()
        check(shown == str(value), f"{element}: shown {shown}, answered {value}")
    for box, amounts in [("mrr", at["mrr"]), ("deferred", at["deferred"])]:
        shown = {e.get_attribute("data-currency"): e.get_attribute("data-milliunits")
                 for e in driver.find_elements(By.CSS_SELECTOR, f"#{box} [data-milliunits]")}
        check(shown == {c: str(v) for c, v in amounts.items()}, f"{box}: shown {shown}, answered {amounts}")
        check(amounts != {}, f"{box}: the test's ledger has some, the answer none")
    # The series: active subscriptions at each month's start, then now.
    lines = driver.find_elements(By.CSS_SELECTOR, "#chart svg polyline")
    check(len(lines) == 2, "the chart has not its two lines")
    if len(lines) == 2:
        active = [p["atStart"]["active"] for p in books["periods"]] + [at["active"]]
        check(lines[1].get_attribute("data-values") == " ".join(map(str, active)), f"active series shown {lines[1].get_attribute('data-values')}, answered {active}")
        check(any(v > 0 for v in active), "no active subscription at any instant")

    # The account's timeline: its products, and each interval's ends.
    driver.find_element(By.ID, "account").send_keys(account)
    driver.find_element(By.CSS_SELECTOR, "#account-form button").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline [data-product]") or "could not" in d.find_element(By.ID, "account-state").text)
    environment = urllib.parse.parse_qs(query)["environment"][0]
    answer = api("/v1/accounts/" + urllib.parse.quote(account, safe="") + "?timeline=true&environment=" + environment)
    products = driver.find_elements(By.CSS_SELECTOR, "#timeline [data-product]")
    check([p.get_attribute("data-product") for p in products] == [t["product"] for t in answer["timeline"]],
          "the timeline's products are not the answer's")
    for element, product in zip(products, answer["timeline"]):
        bars = [(b.get_attribute("data-from"), b.get_attribute("data-until")) for b in element.find_elements(By.CSS_SELECTOR, ".interval")]
        check(bars == [(i.get("from", ""), i.get("until", "")) for i in product["intervals"]],
              f"{product['product']}: intervals shown {bars}, answered {product['intervals']}")

    # Changing the environment asks for the books and the timeline at once: two expensive reads
    # of one key, which may take all the server's slots but one. The page waits its turn (503
    # busy, Retry-After) instead of showing an error.
    Select(driver.find_element(By.ID, "environment")).select_by_visible_text("Sandbox")
    wait.until(lambda d: (d.find_element(By.ID, "months").get_attribute("data-query") or "").endswith("environment=Sandbox")
               or "could not" in d.find_element(By.ID, "status").text)
    check("could not" not in driver.find_element(By.ID, "status").text,
          "the books in Sandbox: " + driver.find_element(By.ID, "status").text)
    wait.until(lambda d: d.find_element(By.ID, "account-state").text not in ("", "loading…"))
    state = driver.find_element(By.ID, "account-state").text
    check(state.startswith("as known at position") or state == "owned nothing, at any instant",
          "the timeline in Sandbox: " + state)

    # The key: in the tab's session storage only.
    check(driver.execute_script("return sessionStorage.getItem('purchase-ledger-key')") == key, "the key is not kept in the tab")
    check(driver.execute_script("return localStorage.length") == 0, "something was put in localStorage")
    check(driver.get_cookies() == [], "a cookie was set")
    driver.save_screenshot(screenshot)
    # Nothing went wrong in the page: no script error, no request the policy refused. (The
    # browser logs each 503 busy the page waited out; the status checks above say it did.)
    for entry in driver.get_log("browser"):
        waited = "the server responded with a status of 503" in entry.get("message", "")
        check(entry.get("level") != "SEVERE" or waited, f"the browser's console: {entry.get('message')}")
finally:
    driver.quit()

for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
