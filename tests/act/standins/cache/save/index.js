'use strict';
require('../cache.js').run('save');
