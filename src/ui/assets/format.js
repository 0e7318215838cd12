/* Text for figures and instants: durations, UTC times, "3 min ago", and a URL path segment. */
export function duration(ms) {
  if (ms < 1000) return Math.round(ms) + ' ms';
  var seconds = ms / 1000;
  if (seconds < 60) return seconds.toFixed(1) + ' s';
  var minutes = Math.floor(seconds / 60);
  if (minutes < 60) return minutes + 'm ' + String(Math.floor(seconds % 60)).padStart(2, '0') + 's';
  var hours = Math.floor(minutes / 60);
  if (hours < 48) return hours + 'h ' + String(minutes % 60).padStart(2, '0') + 'm';
  return Math.floor(hours / 24) + 'd ' + (hours % 24) + 'h';
}

export function time(iso) {
  return iso ? iso.replace('T', ' ').replace('Z', ' UTC') : '';
}

export function ago(iso) {
  var ms = Date.now() - Date.parse(iso);
  if (!isFinite(ms)) return '';
  // An instant still to come (a delivery's next try) reads forward.
  if (ms < -45000) {
    var ahead = Math.round(-ms / 60000);
    return ahead < 60 ? 'in ' + ahead + ' min' : 'in ' + Math.round(ahead / 60) + ' h';
  }
  if (ms < 45000) return 'just now';
  var minutes = Math.round(ms / 60000);
  if (minutes < 60) return minutes + ' min ago';
  var hours = Math.round(minutes / 60);
  if (hours < 48) return hours + ' h ago';
  return Math.round(hours / 24) + ' days ago';
}

export var segment = encodeURIComponent;

/** "A runtime key", "An admin key": the article by the word's sound, as far as its first letter tells. */
export function withArticle(word) {
  return (/^[aeiou]/i.test(word) ? 'An ' : 'A ') + word;
}

/** An instant in the reader's own time zone, as the clock on their screen shows it. */
export function localTime(iso) {
  var at = new Date(iso);
  var today = new Date().toDateString() === at.toDateString();
  return today ? at.toLocaleTimeString() : at.toLocaleString();
}

/** What an operator fact did, in words, for the line after an action (never the event type's name). */
export function factInWords(fact) {
  switch (fact.type) {
    case 'OutcomeVerifiedManually':
      return fact.data.outcome === 'found_committed'
        ? 'Recorded that the write committed (' + fact.data.evidence_ref + ')'
        : 'Recorded that the write is not at the provider';
    case 'StepCancelled':
      return 'Cancelled';
    case 'StepReopened':
      return 'Reopened with ' + fact.data.attempts + ' more attempt' + (fact.data.attempts === 1 ? '' : 's');
    case 'EscalationAcknowledged':
      return (fact.data.reassign ? 'Reassigned: ' : 'Acknowledged: ') + fact.data.assignee + ' has it';
    default:
      return 'Recorded';
  }
}

/** Where a recorded fact left the step, as the console says it after an action or an approval. */
export function stepNow(answer) {
  return 'the step is now ' + answer.state.status.replace(/_/g, ' ') + ' (next: ' + answer.directive.next_action + ').';
}
