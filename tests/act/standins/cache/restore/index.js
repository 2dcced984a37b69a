'use strict';
require('../cache.js').run('restore');
