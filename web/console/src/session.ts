// The signed-in state: the token lives in sessionStorage (gone when the tab closes), and any
// 401 from the API signs the user out.
import { ApiError } from './api';
import { status } from './dom';

export const TOKEN_KEY = 'hutch.token';

let signedOut: (message: string) => void = () => {};

/** onSignedOut sets what happens when the token is refused (the app shows sign-in). */
export function onSignedOut(f: (message: string) => void): void {
  signedOut = f;
}

/** handle shows e in el, and signs out when the token stopped working. */
export function handle(e: unknown, el: HTMLElement): void {
  if (e instanceof ApiError && e.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    signedOut('The token was refused; sign in again.');
    return;
  }
  if (e instanceof DOMException && e.name === 'AbortError') return;
  status(el, errText(e), 'error');
}

export function errText(e: unknown): string {
  if (e instanceof ApiError) return `${e.code}: ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}
