/* django-rq's job lists, with Django's admin actions.js (queues/templates/django_rq/_list_scripts.html).
 *
 * django-rq's templates call $("tr input.action-select").actions(), the jQuery plugin that Django's admin
 * dropped in 4.1: actions.js is plain JavaScript now and starts itself on any page with
 * "tr input.action-select". It then reads the "0 of N selected" counter of the admin's action bar
 * (span.action-counter, data-actions-icnt = the rows on the page), which django-rq's bar lacks:
 * "Cannot read properties of null (reading 'dataset')". This adds the counter before actions.js starts
 * (this script is loaded first, so its DOMContentLoaded listener runs first).
 */
"use strict";
document.addEventListener("DOMContentLoaded", function () {
    const bar = document.querySelector("#changelist-form .actions");
    if (!bar || bar.querySelector(".action-counter")) {
        return;
    }
    const rows = document.querySelectorAll("tr input.action-select").length;
    const counter = document.createElement("span");
    counter.className = "action-counter";
    counter.dataset.actionsIcnt = String(rows);
    counter.textContent = "0 of " + rows + " selected";
    bar.appendChild(counter);
});
