'use strict';
const assert = require('assert');
const { sum } = require('../index');

describe('sum', function () {
  it('adds numbers', function () {
    assert.strictEqual(sum(1, 2, 3), 6);
  });
  it('accepts numeric strings', function () {
    assert.strictEqual(sum('4', 5), 9);
  });
  it('ignores values that are not numbers', function () {
    assert.strictEqual(sum(1, 'x', null, undefined, {}), 1);
  });
});
