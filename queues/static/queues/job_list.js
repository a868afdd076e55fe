/* The selection of a job list (queues/templates/queues/jobs.html), in place of the admin's actions.js.
 *
 * actions.js keeps the checkboxes it found when the page loaded; live.js replaces the rows every few
 * seconds, so this one asks the document each time instead (listeners on the table and the form, which
 * live.js never replaces):
 * - "Select all" (#action-toggle) checks or clears every row of the page;
 * - the counter says "n of m selected";
 * - once every row of the page is checked and the list holds more jobs than the page, "Select all N jobs
 *   in <state>" appears (#select-across); clicking it sets select_across=1, which the confirmation page
 *   (lists.confirm_bulk) reads with the form's state and func; "Clear selection" undoes it.
 * live.js fires "queues:live" on the document after it has swapped the rows: the counter and the question
 * are drawn again then (the checked boxes are live.js's to keep; with "all N jobs" chosen, every row).
 */
"use strict";
(function () {
    function boxes() {
        return Array.from(document.querySelectorAll("#result_list tbody input.action-select"));
    }

    function across() {
        return document.getElementById("select-across-input");
    }

    function show(id, shown) {
        const element = document.getElementById(id);
        if (element) {
            element.classList.toggle("hidden", !shown);
        }
    }

    function draw() {
        const all = boxes();
        const checked = all.filter(function (box) { return box.checked; }).length;
        const everyRow = all.length > 0 && checked === all.length;
        const toggle = document.getElementById("action-toggle");
        if (toggle) {
            toggle.checked = everyRow;
        }
        all.forEach(function (box) {
            box.closest("tr").classList.toggle("selected", box.checked);
        });
        const input = across();
        if (input && (!everyRow || !document.getElementById("select-across"))) {
            input.value = "0";
        }
        const acrossOn = input && input.value === "1";
        const counter = document.getElementById("action-counter");
        if (counter) {
            counter.textContent = checked + " of " + all.length + " selected";
            counter.classList.toggle("hidden", Boolean(acrossOn));
        }
        show("select-across-question", everyRow && !acrossOn);
        show("select-across-clear", Boolean(acrossOn));
    }

    document.addEventListener("DOMContentLoaded", function () {
        const form = document.getElementById("changelist-form");
        if (!form) {
            return;
        }
        form.addEventListener("change", function (event) {
            const target = event.target;
            if (target.id === "action-toggle") {
                boxes().forEach(function (box) { box.checked = target.checked; });
            }
            if (target.id === "action-toggle" || target.classList.contains("action-select")) {
                draw();
            }
        });
        form.addEventListener("click", function (event) {
            const link = event.target.closest("a");
            if (!link || (link.id !== "select-across" && link.id !== "select-across-undo")) {
                return;
            }
            event.preventDefault();
            if (link.id === "select-across") {
                across().value = "1";
            } else {
                across().value = "0";
                boxes().forEach(function (box) { box.checked = false; });
            }
            draw();
        });
        document.addEventListener("queues:live", function () {
            // "All N jobs in <state>" stands for the state, not for the rows it was chosen on: rows that
            // arrived since are part of it.
            if (across() && across().value === "1") {
                boxes().forEach(function (box) { box.checked = true; });
            }
            draw();
        });
        window.addEventListener("pageshow", draw);
        draw();
    });
})();
