'use strict';
const isNumber = require('is-number');

// sum adds every argument that is a number or a numeric string, and ignores the rest.
function sum(...values) {
  return values.filter((v) => isNumber(v)).reduce((acc, v) => acc + Number(v), 0);
}

module.exports = { sum };
